"""An R function traced once per input signature and replayed in Python.

``op_grad()`` and ``op_compile()`` run ``f`` once per signature on Keras
symbolic tensors, as a custom-gradient function's ``f`` is traced
(``_trace``), and replay the recorded operations (``_program``) under the
backend's autodiff or compiler: no call back into R.  A signature whose
trace fails calls R at every call; R is told once why (``notify``), or,
with ``trace="strict"``, it is a :class:`TraceError`.
"""

from collections import OrderedDict

import keras
from keras import KerasTensor

from customgrad import _bridge, _messages, _program, _trace
from customgrad._keras_internals import compute_output_spec
from customgrad._structure import flatten, unflatten
from customgrad.errors import TraceError, find_error, is_recursion, reason_of


class TracedFunction(_trace.TraceCache):
    """Calls ``r_fn`` (an R callback of the arguments, which returns a
    nest of tensors and takes ``tracing=True``) traced, or, with ``trace``
    False, R at every call."""

    def __init__(self, r_fn, trace=True, notify=None, warn_retrace=None,
                 max_traces=_trace.DEFAULT_MAX_TRACES):  # fmt: skip
        self.r_fn = r_fn
        self.trace = trace
        self.notify = notify
        self.warn_retrace = warn_retrace
        self.max_traces = max_traces
        self.cache = OrderedDict()  # signature -> _Replay or _trace.Fallback
        self.by_inputs = {}  # _trace.inputs_key() -> the same
        self.traces = 0
        self.notified = False
        self.warned = False

    @property
    def n_cached(self):
        return len(self.cache)

    def __call__(self, *args):
        if not self.trace:
            return _bridge.call_r(self.r_fn, *args)
        leaves, spec = flatten(list(args))
        entry = self._entry(leaves, spec)
        if isinstance(entry, _Unsure):
            # Untraced, an error that is f's own is raised here, as it is.
            value = _bridge.call_r(self.r_fn, *args)
            self._keep(leaves, spec, _trace.Fallback(entry.reason))
            self._tell(entry.reason)
            return value
        if isinstance(entry, _trace.Fallback):
            self._tell(entry.reason)
            return _bridge.call_r(self.r_fn, *args)
        return entry(leaves)

    def untrace(self):
        """Call R at every call from now on: R's values that the traces
        hold changed (R checks them, ``captures.R``)."""
        self.trace = False

    def replays(self, *args):
        """Whether a call on ``args`` would replay a cached trace (no R)."""
        if not self.trace:
            return False
        leaves, spec = flatten(list(args))
        entry = self.cached(_trace.signature(leaves, spec), leaves, spec)
        return isinstance(entry, _Replay)

    def _tell(self, reason):
        if not self.notified and self.notify is not None:
            self.notified = True
            _bridge.call_r(self.notify, reason)

    def output_spec(self, *args):
        """The value's symbolic tensors for symbolic ``args`` (from their
        trace, made now if need be), or None where the trace failed."""
        if not self.trace:
            return None
        leaves, spec = flatten(list(args))
        entry = self._entry(leaves, spec)
        if isinstance(entry, _trace.Fallback):
            return None
        return unflatten(
            entry.out_spec, [KerasTensor(s, d) for s, d in entry.value_specs]
        )

    def _entry(self, leaves, spec):
        """The entry for these inputs: cached for their signature, or for
        inputs of another kind with the same nesting, shapes and dtypes
        (the trace runs on symbolic copies either way), or traced now."""
        key = _trace.signature(leaves, spec)
        entry = self.cached(key, leaves, spec)
        if entry is None:
            entry = self._trace(key, leaves, spec)
        return entry

    def _trace(self, key, leaves, spec):
        self.traces += 1
        symbolic = [
            KerasTensor(_bridge.static_shape(x), _bridge.dtype_of(x)) for x in leaves
        ]
        try:
            with _trace.nested_call, _trace.replay_safe():
                value = _messages.check_trace_failed(
                    _bridge.call_r(
                        self.r_fn, *unflatten(spec, symbolic), count=False, tracing=True
                    )
                )
            out_leaves, out_spec = flatten(value)
            out_leaves = [_trace.symbolic_leaf(x) for x in out_leaves]
            entry = _Replay(
                _program.compile_programs(symbolic, out_leaves, [], []),
                out_spec,
                out_leaves,
            )
        except _messages.TraceFailed as exc:
            entry = _trace.Fallback(str(exc))
        except Exception as exc:  # noqa: BLE001 - decided below
            if is_recursion(exc) and _trace.nesting_depth() == 0:
                # f called gradients of itself, or of functions that call R
                # on symbolic tensors, until R's stack ran low: R running f
                # at every call goes only as deep as the values need.
                entry = _trace.Fallback(_trace.RECURSED)
            elif find_error(exc) is not None:
                if getattr(exc, "customgrad_stop", False):
                    raise  # an interrupt or a time limit
                # An error R raised: f's own (customgrad's checks of its
                # value), or the trace's (a function f calls that can't run
                # on symbolic tensors). The call untraced decides.
                return _Unsure(reason_of(exc))
            else:
                entry = _trace.Fallback(reason_of(exc))
        return self._keep(leaves, spec, entry, key)

    def _keep(self, leaves, spec, entry, key=None):
        """Cache ``entry`` (a replay, or a :class:`_trace.Fallback`) for
        these inputs."""
        if isinstance(entry, _trace.Fallback) and self.trace == "strict":
            raise TraceError(reason=entry.reason)
        if key is None:
            key = _trace.signature(leaves, spec)
        self.store(key, leaves, spec, entry)
        return entry


class _Unsure(_trace.Fallback):
    """A trace that failed with an error R raised (see ``_trace``): the call
    untraced decides whether it is ``f``'s own (raised there) or the
    trace's (then kept as a :class:`_trace.Fallback`)."""

    __slots__ = ()


class _Replay:
    """A function of the flat input tensors that runs ``f``'s recorded
    operations and returns its value, nested as ``f`` returned it."""

    __slots__ = ("compiled", "out_spec", "value_specs")

    def __init__(self, compiled, out_spec, value_leaves):
        self.compiled = compiled
        self.out_spec = out_spec
        self.value_specs = [(tuple(x.shape), x.dtype) for x in value_leaves]

    def __call__(self, flat):
        c = self.compiled
        values = [None] * c.n_slots
        values[: c.n_inputs] = flat
        c.forward.run(values)
        return unflatten(self.out_spec, [_trace.output_value(v, values) for v in c.value])


class GradientOp(keras.Operation):
    """A gradient transform called on Keras symbolic tensors (inside the
    trace of another function): recorded as one node of Keras' graph, whose
    replay computes the gradient on the replay's tensors, so that gradients
    of gradients are traced too.  ``fn(upstream, *args)`` is the transform,
    ``traced`` its :class:`TracedFunction` (or None), ``wrt`` the arguments it
    differentiates (all if None)."""

    def __init__(self, fn, traced, wrt):
        super().__init__(name="customgrad_gradient")
        self.fn = fn
        self.traced = traced
        self.wrt = wrt

    def call(self, *args):
        return self.fn(*args)

    def compute_output_spec(self, upstream, *args):
        # From the trace: no second run of the transform on placeholders.
        value = None if self.traced is None else self.traced.output_spec(*args)
        if value is None:
            return compute_output_spec(self.fn, upstream, *args)
        which = range(len(args)) if self.wrt is None else self.wrt
        grads = []
        for i in which:
            leaves, spec = flatten(args[i])
            grads.append(unflatten(spec, [KerasTensor(x.shape, x.dtype) for x in leaves]))
        return {"value": value, "grad": grads}
