"""``op_grad()``'s and ``op_compile()``'s R function, traced once per input
signature and replayed in Python: the trace engine of custom-gradient
functions (``_trace.Traced``), with R's function as its source
(``_trace.RFunction``) and no ``grad``.  A signature whose trace fails
calls R at every call; R is told once why (``notify``), or, with
``trace="strict"``, it is a :class:`TraceError`.
"""

import keras
from keras import KerasTensor

from customgrad import _bridge, _trace
from customgrad._keras_internals import compute_output_spec
from customgrad._structure import flatten, unflatten


class TracedFunction:
    """Calls ``r_fn`` (see :class:`_trace.RFunction`) on its arguments,
    traced, or, with ``trace`` False, R at every call."""

    def __init__(self, r_fn, trace=True, notify=None, warn_retrace=None,
                 max_traces=_trace.DEFAULT_MAX_TRACES):  # fmt: skip
        self.r_fn = r_fn
        self.core = _trace.Traced(
            _trace.RFunction(r_fn),
            notify,
            warn_retrace,
            strict=trace == "strict",
            max_traces=max_traces,
        )
        if not trace:
            self.core.untrace()

    @property
    def trace(self):
        """Whether calls may replay traces (False after :meth:`untrace`)."""
        return self.core.untraced is None

    @property
    def n_cached(self):
        return self.core.n_cached

    @property
    def n_traces(self):
        return self.core.n_traces

    def __call__(self, *args):
        if not self.trace:
            # Its arguments may be no tensors.
            return _bridge.call_r(self.r_fn, *args)
        leaves, spec = flatten(list(args))
        value, value_spec = self.core.forward(leaves, spec)[:2]
        return unflatten(value_spec, value)

    def untrace(self):
        """Call R at every call from now on: R's values that the traces
        hold changed (R checks them, ``captures.R``)."""
        self.core.untrace()

    def trace_for(self, *args):
        """The trace a call on ``args`` replays, made now if need be (R
        runs), or None where such a call runs R."""
        leaves, spec = flatten(list(args))
        entry = self.core.bind(leaves, spec)
        return entry if isinstance(entry, _trace.Trace) else None

    def output_spec(self, *args):
        """The value's symbolic tensors for symbolic ``args`` (from their
        trace, made now if need be), or None where the trace failed."""
        leaves, spec = flatten(list(args))
        return self.core.output_spec(leaves, spec)


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
