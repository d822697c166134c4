"""Run an R function: through R, or replayed from a trace.  The one trace
engine, for custom-gradient functions (:class:`RCalls`, ``f`` and its
``grad``) and for ``op_grad()``'s and ``op_compile()``'s ``f``
(:class:`RFunction`, see ``_traced_function``).

Every backend adapter calls ``fn.forward(flat, in_spec)`` and gets
``(value leaves, value spec, saved, backward)``: ``saved`` are the tensors
the backward pass needs (the adapter keeps them as its backend wants), and
``backward(upstream, saved)`` takes one upstream tensor per value leaf and
returns one gradient per input leaf.

:class:`RCalls` calls R's ``f`` at every forward and its ``grad`` at every
backward.  :class:`Traced` calls R once per input signature, on Keras
symbolic tensors, compiles what ``f`` and ``grad`` did into programs
(``_program``) and from then on runs those in Python.  A signature whose
trace fails (``f`` read a tensor's value, used R's random numbers, or called
something Keras can't record) falls back to :class:`RCalls`, after one
message from R; in strict mode the failure is an error instead.

A call of the function on symbolic tensors (inside another trace, or in a
functional model) is recorded as a node bound to the trace made for it
(:meth:`Traced.bind`), never looked up by signature at replay, where it
could find the trace that recorded it and replay itself.  A call of a
function inside a trace of the same function (recursion) is traced on its
own and not cached, as R would run it again; one that re-enters a trace
whose ``f`` has run and whose ``grad`` is being traced, with its signature,
is bound to that trace itself, resolved when it is replayed (its own
gradient is then one level deeper, taken only when differentiated again).
Nested calls that run R are counted: past :data:`MAX_DEPTH` levels they
stop with :class:`RecursionLimitError` (R also stops them before its C
stack runs out).
"""

import contextlib
import sys
import threading
from collections import OrderedDict

import keras
import numpy as np
from keras import KerasTensor

from customgrad import _backend, _bridge, _host, _keras_internals, _messages
from customgrad import _program
from customgrad._structure import flatten
from customgrad.errors import (
    ProtocolError,
    RecursionLimitError,
    TraceError,
    TransformError,
    find_error,
    is_recursion,
    reason_of,
)

DEFAULT_MAX_TRACES = 32
# Nested calls of custom-gradient functions that run R (f, or a trace of
# f and grad), across functions: each level takes some 400-600 kB of C
# stack through R, reticulate and Python, so R's 8 MB stack holds fewer
# than 20; R stops earlier when its stack runs low (R/trace.R).  This
# bound holds where R's stack size is unknown, and for Python callers.
MAX_DEPTH = 64
# Where R can't measure its stack (`ulimit -s unlimited`), Python's own
# recursion limit came first (a level is 20-30 Python frames: 45 levels of
# an untraced function on JAX), and its RecursionError, raised again as
# the levels unwound, reached R unclassed or as a C++ error. So past
# _COUNT_FROM levels the frames are counted, and nesting stops while a
# quarter of Python's limit is left for the error to unwind through.
_COUNT_FROM = 8
_depth = [0]


class _Nested:
    """One more level of nested calls that run R (see :data:`MAX_DEPTH`)."""

    __slots__ = ()

    def __enter__(self):
        depth = _depth[0]
        if depth >= MAX_DEPTH:
            raise RecursionLimitError(depth=depth + 1, limit=MAX_DEPTH)
        if depth >= _COUNT_FROM:
            limit = sys.getrecursionlimit()
            if _python_frames() > 0.75 * limit:
                raise RecursionLimitError(depth=depth + 1, python_limit=limit)
        _depth[0] = depth + 1

    def __exit__(self, *exc):
        _depth[0] -= 1


def _python_frames():
    """How many Python frames this thread is in (what Python's recursion
    limit counts); no public API tells."""
    n = 0
    frame = sys._getframe(1)
    while frame is not None:
        n += 1
        frame = frame.f_back
    return n


nested_call = _Nested()


def nesting_depth():
    """How many calls that run R are nested now (R's recursion error)."""
    return _depth[0]


DRAW_REASON = (
    "It drew Keras random numbers on no traced tensor (such as "
    "`random_uniform(op_shape(x))`), which a trace would fix at one draw."
)
READ_REASON = (
    "It used a Keras variable's value on no traced tensor (such as "
    "`op_exp(v)` of a captured variable `v`, or `as.array(v)`), which a "
    "trace would fix at its value now. Use it in operations on traced "
    "tensors, such as `op_multiply(x, v)`, or pass it as an argument."
)


@contextlib.contextmanager
def replay_safe():
    """Fail the trace made in this block (:class:`_messages.TraceFailed`) if
    its replay would not compute what R computed from Keras' state:

    * Keras random numbers drawn on no traced tensor run while tracing,
      once, and the trace would keep their value, as it would R's own
      random numbers (R refuses those);
    * a variable's value used on no traced tensor (``op_exp(v)``, read in
      R) is computed once too, and the trace would keep it after
      ``v$assign()``. A variable used in an operation on traced tensors
      is recorded as the variable, read at every replay.

    The block runs in a :class:`_Watch`, a Keras stateless scope, which
    every such read of a variable's value asks for it (a draw reads its
    seed generator's state). Keras running an operation or a layer on the
    trace's symbolic tensors, to infer its output, does so in a stateless
    scope of its own, which the reads there ask instead: the replay runs
    those again."""
    with _Watch() as watch:
        yield
    if watch.draws:
        raise _messages.TraceFailed(DRAW_REASON)
    if watch.reads:
        raise _messages.TraceFailed(READ_REASON)


def _symbolic_run():
    """The adapter's context for R's run on symbolic tensors (JAX's), or
    none."""
    context = getattr(_backend.adapter(), "symbolic_run", None)
    return contextlib.nullcontext() if context is None else context()


class _Watch(keras.StatelessScope):
    """The stateless scope R traces in (:func:`replay_safe`): counts the
    values read through it, draws (of a seed generator's state) apart;
    hands out the values of the scope around it (Keras' JAX training
    step, a compiled call's, which map the variables to this call's
    values); keeps what is assigned, as every stateless scope does, and
    assigns it when the block ends, in order, to the variables or to the
    scope around."""

    def __init__(self):
        super().__init__()
        self.draws = 0
        self.reads = 0
        self.assigned = []

    def get_current_value(self, variable):
        if _keras_internals.is_seed_state(variable):
            self.draws += 1
        else:
            self.reads += 1
        value = super().get_current_value(variable)
        if value is None and self.original_scope is not None:
            value = self.original_scope.get_current_value(variable)
        return value

    def add_update(self, update):
        super().add_update(update)
        if not any(v is update[0] for v in self.assigned):
            self.assigned.append(update[0])

    def __exit__(self, *exc_info):
        super().__exit__(*exc_info)
        for variable in self.assigned:
            variable.assign(self.state_mapping[id(variable)])


class RCalls:
    """Call R's ``f`` on every forward, R's ``grad`` on every backward.

    ``history`` (an adapter's ``forward_history``, or None) is the context
    ``f`` runs in: on PyTorch, autograd on where the call records it, so
    that what ``grad`` captures from ``f`` can be differentiated again
    without running ``f`` a second time (R's state may have changed).
    """

    def __init__(self, r_forward, fill_none, history=None):
        self.r_forward = r_forward
        self.fill_none = fill_none
        self.history = history or contextlib.nullcontext

    def forward(self, flat, in_spec):
        # R runs on the transform's tensors and can't batch what it does.
        transform = _backend.adapter().batching(flat)
        if transform is not None:
            raise TransformError(
                kind="untraced",
                transform=transform,
                why="R would run on the transform's tensors",
            )
        inputs = _bridge.pack(in_spec, flat)
        with nested_call, self.history():
            leaves, spec, grad = _bridge.call_forward(self.r_forward, inputs)
        return leaves, spec, list(flat), _RBackward(self.fill_none, in_spec, spec, grad)

    def run_symbolic(self, inputs):
        """``f``'s value and its ``grad`` for symbolic ``inputs``, run in R
        while tracing."""
        reply = _messages.read_forward_reply(
            _bridge.call_r(self.r_forward, *inputs, count=False, tracing=True)
        )
        return reply.value, _bridge.Grad(reply.grad)


class RFunction:
    """Call R's ``r_fn`` (an R function of the arguments, which returns a
    nest of tensors and takes ``tracing=True``) on every call, for
    ``op_grad()`` and ``op_compile()``: the backend differentiates or
    compiles what it does, so there is no ``grad`` and nothing saved."""

    fill_none = False

    def __init__(self, r_fn):
        self.r_fn = r_fn

    def forward(self, flat, in_spec):
        value = _bridge.call_r(self.r_fn, *_bridge.pack(in_spec, flat))
        leaves, spec = flatten(value)
        return leaves, spec, [], None

    def run_symbolic(self, inputs):
        value = _bridge.call_r(self.r_fn, *inputs, count=False, tracing=True)
        return _messages.check_trace_failed(value), None


class _RBackward:
    """R's ``grad`` of one forward call; ``saved`` are the flat inputs."""

    __slots__ = ("fill_none", "in_spec", "spec", "grad")
    calls_r = True  # differentiable again as it is, see RCalls

    def __init__(self, fill_none, in_spec, spec, grad):
        self.fill_none = fill_none
        self.in_spec = in_spec
        self.spec = spec
        self.grad = grad

    def __call__(self, upstream, saved, variables=None):
        inputs = _bridge.pack(self.in_spec, saved)
        upstream = _bridge.pack(self.spec, upstream)
        with nested_call:
            return _bridge.call_grad(
                self.grad, upstream, inputs, self.fill_none, variables
            )


class Fallback:
    """A signature whose trace failed, which calls R at every call (for
    custom-gradient functions here, and for ``_traced_function``'s):
    ``reason``, why, is told once, then cleared."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason


class Traced:
    """Replay traces per input signature; fall back to ``source``, R
    untraced: :class:`RCalls` (a custom-gradient function) or
    :class:`RFunction` (``op_grad()``'s and ``op_compile()``'s ``f``).

    At most ``max_traces`` are kept, oldest dropped first, found by
    signature or by :func:`inputs_key`: a trace is made on symbolic copies
    of the inputs, so it serves eager and symbolic inputs of the same
    nesting, shapes and dtypes alike.

    ``notify(reason)`` is R's callback for the first trace that failed: it
    shows the one-time message.  In strict mode a failed trace raises
    :class:`TraceError` instead.  R decides what a failed trace is (it
    replies a trace-failed record, see ``_messages``); errors it raises,
    such as customgrad's checks of ``f``'s and ``grad``'s results, are raised
    at once: they fail the same way untraced.
    ``warn_retrace(count)`` is R's callback for the first trace past
    ``max_traces``, after which the oldest trace is dropped for each new one.
    """

    def __init__(
        self,
        source,
        notify,
        warn_retrace,
        strict=False,
        max_traces=DEFAULT_MAX_TRACES,
        host=None,
    ):
        self.source = source  # RCalls or RFunction: R, untraced
        self.host = host  # a _host.HostCalls, for abstract inputs
        self.notify = notify
        self.warn_retrace = warn_retrace
        self.strict = strict
        self.max_traces = max_traces
        self.cache = OrderedDict()  # signature -> Trace or Fallback
        self.by_inputs = {}  # inputs_key() -> the same, any input kind
        # Traces made on symbolic inputs with unknown dimensions (a model's
        # batch size) serve every size of those dimensions.
        self.general = {}  # general_key -> [Trace]
        self.aliases = {}  # signature -> a general Trace it matched
        self.traces = 0  # traces made so far (R runs for each)
        self.in_progress = []  # _Pending of the traces being made, innermost last
        self.warned = False
        self.notified = False
        self.untraced = None  # a Fallback for every call (see untrace())

    def untrace(self):
        """Call R at every call from now on: R's values that the traces
        hold changed (R checks them, ``captures.R``, and says so)."""
        self.untraced = Fallback(None)

    def forward(self, flat, in_spec):
        key = signature(flat, in_spec)
        if self.in_progress:
            # Called inside a trace of its own f or grad: R would run it
            # again, so it gets a trace of its own.
            entry = self._trace(key, flat, in_spec, keep=False)
        else:
            entry = self.lookup(key, flat, in_spec)
            if entry is None:
                entry = self._trace(key, flat, in_spec)
        return self.run(entry, flat, in_spec)

    def run(self, entry, flat, in_spec):
        """Run ``entry`` (a trace, or a signature that calls R) on ``flat``."""
        if isinstance(entry, Fallback):
            if self.host is not None and _host.is_abstract(flat):
                result = self.host.forward_abstract(self.source, flat, in_spec)
            else:
                result = self.source.forward(flat, in_spec)
            if entry.reason is not None:
                reason, entry.reason = entry.reason, None
                if not self.notified and self.notify is not None:
                    self.notified = True
                    _bridge.call_r(self.notify, reason)
            return result
        return entry.forward(flat)

    def bind(self, flat, in_spec):
        """The entry a call on symbolic tensors ``flat`` is recorded with:
        a trace (cached, or made now), a :class:`_Pending` trace that the
        call re-enters, or a :class:`Fallback`."""
        key = signature(flat, in_spec)
        if self.in_progress:
            for pending in reversed(self.in_progress):
                if pending.key == key and pending.spec is not None:
                    # f has run, grad is being traced: a call of the
                    # function itself, replayed when the trace is done.
                    return pending
            return self._trace(key, flat, in_spec, keep=False)
        entry = self.lookup(key, flat, in_spec)
        if entry is None:
            entry = self._trace(key, flat, in_spec)
        return entry

    @property
    def n_cached(self):
        """How many signatures are cached."""
        return len(self.cache)

    @property
    def n_traces(self):
        """How many cached signatures replay a trace (not R's at every
        call): what a changed R value would make old."""
        return sum(isinstance(e, Trace) for e in self.cache.values())

    def output_spec(self, flat, in_spec):
        """The value's symbolic tensors for symbolic inputs ``flat`` (their
        trace gives the shapes), or None if the trace failed."""
        return value_spec(self.bind(flat, in_spec))

    def _trace(self, key, flat, in_spec, keep=True):
        """Trace ``f`` and ``grad`` for ``flat``; cache the result if
        ``keep`` (a trace made inside another of this function is not:
        R's state, such as a recursion's depth, made it)."""
        if threading.current_thread() is not threading.main_thread():
            # A replica's thread (TensorFlow's MirroredStrategy): R runs
            # only on the main thread, where the backend may run the trace
            # between the replicas' steps; elsewhere call_r refuses.
            on_main = getattr(_backend.adapter(), "on_main_thread", None)
            if on_main is not None:
                return on_main(lambda: self._trace_here(key, flat, in_spec, keep))
        return self._trace_here(key, flat, in_spec, keep)

    def _trace_here(self, key, flat, in_spec, keep):
        """:meth:`_trace` on this thread."""
        self.traces += 1
        pending = _Pending(key)
        self.in_progress.append(pending)
        try:
            with nested_call, replay_safe(), _symbolic_run():
                entry = Trace(self.source, flat, in_spec, pending)
        except _messages.TraceFailed as exc:
            entry = Fallback(str(exc))
        except Exception as exc:  # noqa: BLE001 - decided below
            if len(self.in_progress) == 1 and is_recursion(exc):
                # Tracing called the function again without end, as a grad
                # that calls it on new inputs does: each level's grad is
                # traced with its f. R running it at every call takes each
                # level only as deep as the gradients asked for, and R's
                # recursion error is still raised if that never ends.
                entry = Fallback(RECURSED)
            elif find_error(exc) is not None:
                # customgrad's checks, and errors R raised rather than
                # replying trace-failed: they fail the same way untraced.
                raise
            else:
                # Python could not trace it (an operation Keras can't
                # record, a graph that can't be compiled).
                entry = Fallback(reason_of(exc))
        finally:
            self.in_progress.pop()
        pending.entry = entry
        if isinstance(entry, Fallback) and self.strict:
            raise TraceError(reason=entry.reason)
        if not keep:
            return entry
        self._store(key, flat, in_spec, entry)
        if isinstance(entry, Trace) and entry.is_general:
            self.add_general(in_spec, entry)
        return entry

    def _store(self, key, flat, in_spec, entry):
        if len(self.cache) >= self.max_traces:
            _, dropped = self.cache.popitem(last=False)
            self.by_inputs = {
                k: e for k, e in self.by_inputs.items() if e is not dropped
            }
            if not self.warned and self.warn_retrace is not None:
                self.warned = True
                _bridge.call_r(self.warn_retrace, self.traces)
        self.cache[key] = entry
        self.by_inputs[inputs_key(flat, in_spec)] = entry

    def lookup(self, key, flat, in_spec):
        """The entry cached for these inputs' signature, or for inputs of
        another kind with their nesting, shapes and dtypes, or a general
        trace they fit, or None."""
        if self.untraced is not None:
            return self.untraced
        entry = self.cache.get(key)
        if entry is None:
            entry = self.by_inputs.get(inputs_key(flat, in_spec))
        if entry is None:
            entry = self._general_match(key, flat, in_spec)
        return entry

    def add_trace(self, entry):
        """Keep ``entry``, a trace made elsewhere (a saved one), as if it
        had been made here for symbolic inputs."""
        symbolic = [KerasTensor(shape, dtype) for shape, dtype in entry.input_specs]
        self.cache[signature(symbolic, entry.nesting)] = entry
        if entry.is_general:
            self.add_general(entry.nesting, entry)

    def add_general(self, in_spec, entry):
        """Let ``entry``, a trace with unknown dimensions, serve inputs of
        any size there."""
        key = general_key(in_spec.key, entry.input_specs)
        traces = self.general.setdefault(key, [])
        traces.append(entry)
        del traces[: -self.max_traces]

    def _general_match(self, key, flat, in_spec):
        """A general trace that ``flat`` fits, or None."""
        if not self.general:
            return None
        entry = self.aliases.get(key)
        if entry is not None:
            return entry
        specs = [(_bridge.static_shape(x), _bridge.dtype_of(x)) for x in flat]
        for entry in reversed(self.general.get(general_key(in_spec.key, specs), [])):
            if all(
                _bridge.shapes_match(shape, traced)
                for (shape, _), (traced, _) in zip(specs, entry.input_specs)
            ):
                if len(self.aliases) >= _MAX_ALIASES:
                    self.aliases.clear()
                self.aliases[key] = entry
                return entry
        return None


def value_spec(entry):
    """The value's symbolic tensors of a trace or :class:`_Pending` one;
    None for a :class:`Fallback`."""
    if isinstance(entry, Fallback):
        return None
    leaves = [KerasTensor(shape, dtype) for shape, dtype in entry.value_specs]
    return _bridge.pack(entry.spec, leaves)


class _Pending:
    """A trace being made, for calls that re-enter it: ``spec`` and
    ``value_specs`` once ``f`` has run, ``entry`` (the trace, or a
    :class:`Fallback`) once it is done."""

    __slots__ = ("key", "spec", "value_specs", "entry")

    def __init__(self, key):
        self.key = key
        self.spec = None
        self.value_specs = None
        self.entry = None


class Bound:
    """The core of a call recorded on symbolic tensors: it runs the entry
    it was recorded with (see :meth:`Traced.bind`), whatever the cache
    holds when it is replayed."""

    __slots__ = ("traced", "entry")

    def __init__(self, traced, entry):
        self.traced = traced
        self.entry = entry

    def forward(self, flat, in_spec):
        entry = self.entry
        if isinstance(entry, _Pending):
            entry = entry.entry
            if entry is None:
                raise ProtocolError(
                    problem="a call recorded in a trace ran before the trace was done"
                )
        return self.traced.run(entry, flat, in_spec)


def signature(flat, in_spec):
    """What a trace depends on: the nesting, floatx, and each input's type
    (eager or symbolic, the tensor kind), shape and dtype."""
    return (
        in_spec.key,
        keras.config.floatx(),
        tuple((type(x), x.shape, x.dtype) for x in flat),
    )


def inputs_key(flat, in_spec):
    """A signature without the inputs' kinds: what the trace itself
    depends on (it runs on symbolic copies of the inputs)."""
    return (
        in_spec.key,
        keras.config.floatx(),
        tuple((_bridge.static_shape(x), _bridge.dtype_of(x)) for x in flat),
    )


# Signatures remembered as served by a general trace.
_MAX_ALIASES = 256


def general_key(nesting, input_specs):
    """What a general trace and the inputs it serves share: the nesting,
    floatx, and each input's dtype and rank."""
    return (
        nesting,
        keras.config.floatx(),
        tuple((dtype, None if shape is None else len(shape)) for shape, dtype in input_specs),
    )


RECURSED = (
    "Tracing it called it again and again without end (a `grad` that calls "
    "the function is traced with each call's `f`)."
)


class Trace:
    """One signature's compiled programs, run in Python."""

    __slots__ = (
        "compiled", "nesting", "spec", "fill_none", "value_specs", "input_specs",
    )  # fmt: skip

    def __init__(self, source, flat, in_spec, pending=None):
        symbolic = [
            KerasTensor(_bridge.static_shape(x), _bridge.dtype_of(x)) for x in flat
        ]
        inputs = _bridge.pack(in_spec, symbolic)
        value, grad = source.run_symbolic(inputs)
        leaves, spec = flatten(value)
        leaves = [symbolic_leaf(x) for x in leaves]
        value_specs = [(tuple(x.shape), x.dtype) for x in leaves]
        if pending is not None:
            # grad may call the function itself with these inputs.
            pending.value_specs = value_specs
            pending.spec = spec
        upstream, grads = [], []
        if grad is not None:
            upstream = [KerasTensor(x.shape, x.dtype) for x in leaves]
            grads = _bridge.call_grad(
                grad,
                _bridge.pack(spec, upstream),
                inputs,
                source.fill_none,
                convert=symbolic_leaf,
            )
        self.compiled = _program.compile_programs(symbolic, leaves, upstream, grads)
        self.nesting = in_spec
        self.spec = spec
        self.value_specs = value_specs
        self.input_specs = [(tuple(x.shape), x.dtype) for x in symbolic]
        self.fill_none = source.fill_none

    @classmethod
    def from_parts(cls, **parts):
        """A trace from its parts (a saved one, see ``_saving``)."""
        self = cls.__new__(cls)
        for name, value in parts.items():
            setattr(self, name, value)
        return self

    @property
    def is_general(self):
        """Whether a dimension of an input was unknown: R never saw it, so
        the programs hold for every size there."""
        return any(d is None for shape, _ in self.input_specs for d in shape)

    def forward(self, flat):
        c = self.compiled
        values = [None] * c.n_slots
        values[: c.n_inputs] = flat
        c.forward.run(values)
        leaves = [output_value(v, values) for v in c.value]
        return leaves, self.spec, [values[s] for s in c.saved], self

    def rule_constants(self):
        """What the backward program captured (tensors, Keras variables)."""
        return self.compiled.backward.constants()

    def backward(self, upstream, saved, variables=None):
        """Gradients for the inputs; with TensorFlow's ``variables`` (Keras
        variables that ``f`` captured), also None for each of them: as on
        JAX and PyTorch, a custom gradient gives gradients to its inputs
        only."""
        grads = self._backward(upstream, saved)
        if variables:
            return grads, [None] * len(variables)
        return grads

    # The adapters call what ``forward`` returns: the trace itself, so that
    # PyTorch's gradients can read its ``rule_constants()``.
    __call__ = backward

    def _backward(self, upstream, saved):
        c = self.compiled
        values = [None] * c.n_slots
        for s, v in zip(c.saved, saved):
            values[s] = v
        values[c.upstream_start : c.upstream_start + c.n_upstream] = upstream
        c.backward.run(values)
        return [output_value(g, values) for g in c.grads]


def output_value(leaf, values):
    if isinstance(leaf, int):
        return values[leaf]
    if leaf[0] == "zeros":  # a saved trace's missing gradient (_saving)
        return keras.ops.zeros_like(values[leaf[1]])
    constant = leaf[1]
    if constant is None:
        return None
    return keras.ops.convert_to_tensor(constant.array, dtype=constant.dtype)


def symbolic_leaf(x):
    """A leaf of ``f``'s value or ``grad``'s result at trace time: symbolic
    tensors as they are; anything else a constant (checked like a tensor)."""
    if x is None or isinstance(x, KerasTensor):
        return x
    if isinstance(x, keras.Variable):
        raise _program.GraphError(
            "`f` or `grad` returned a Keras variable itself; its value would "
            "be fixed at the trace."
        )
    return Constant(keras.ops.convert_to_numpy(x))


class Constant:
    """A constant leaf: carries shape and dtype for the checks, and is
    turned into a tensor at each call (never kept as one: a tensor made
    while tracing inside tf.function belongs to that graph)."""

    __slots__ = ("array", "shape", "dtype")

    def __init__(self, array):
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = keras.backend.standardize_dtype(array.dtype)

    def cast_to(self, dtype):
        return Constant(np.asarray(self.array).astype(numpy_dtype(dtype)))


def numpy_dtype(dtype):
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)
