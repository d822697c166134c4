"""JAX: ``jax.custom_gradient`` on flat arrays.

JAX calls the gradient rule while it traces the forward pass, so under
``jax.grad`` the backward program (or R's ``grad``) runs at forward time,
on tracers; what must happen in the backward pass itself (R's due
collection, ``_memory``) goes in a callback there.  JAX wants a zero array,
never None, for an input without a gradient.
"""

import contextlib

import jax
import jax.experimental.sparse
import keras
import numpy as np
from jax import lax

from customgrad import _bridge, _host, _keras_internals, _memory
from customgrad.errors import ThreadError, TransformError, raise_host_stop

FILL_NONE = True
# A failed host callback reaches the caller; JAX's log of it is dropped.
_host.quiet("jax._src.callback")
# jax.jit traces R once per signature.
# JAX never hands grad variables.
GRAD_GETS_VARIABLES = False
# A traced function's gradient called eagerly from R runs under jax.jit:
# one program instead of a dispatch per operation (the README's log1pexp()
# gradient at n = 1: 323 us a step, median 120, against 2,880 for the same
# step in Python, bench run 2026-12-07-0226).
COMPILES_GRADIENT_REPLAYS = True
# From a signature's first call: eagerly, JAX compiles each operation for
# its shapes, which costs more than compiling the whole gradient (60-340
# against 57-80 ms for a custom gradient of one keras3 op, first seen).
COMPILES_FIRST_CALL = True


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""
    # One jax.custom_gradient function per input nesting, made once: JAX
    # may run it again long after the call (jax.export, jax2tf lower it
    # later), so its state lives in its closure, not in the call.
    wrapped = {}

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        entry = wrapped.get(in_spec.key)
        if entry is None:
            if len(wrapped) >= _MAX_NESTINGS:
                wrapped.clear()
            entry = wrapped[in_spec.key] = _wrap(fn, in_spec)
        inner, state = entry
        try:
            result = inner(*tensors)
        except TypeError as error:
            # jax.custom_vjp refuses forward mode with a TypeError.
            if "forward-mode" not in str(error):
                raise
            raise TransformError(
                kind="forward",
                transform="jax.jvp(), jax.jacfwd(), keras.ops.jvp()",
                reverse="jax$grad(), jax$vjp()",
                why="its rule gives vector-Jacobian products only",
            ) from None
        return _bridge.pack(state["spec"], list(result))

    return call


# Distinct input nestings kept wrapped (each is a small closure).
_MAX_NESTINGS = 64


def _wrap(fn, in_spec):
    state = {}

    @jax.custom_gradient
    def inner(*flat):
        # Under jax.grad, JAX may hand the primal Python float back here.
        flat = [_bridge.to_tensor(x) for x in flat]
        eager = not any(isinstance(x, jax.core.Tracer) for x in flat)
        leaves, spec, saved, backward = fn.forward(flat, in_spec)
        state["spec"] = spec
        if any(_differentiated(x) for x in flat):
            # A gradient of this call is itself differentiated (a second
            # derivative). JAX would differentiate the value computed here
            # as it is; the value of the function itself, whose derivative
            # is the rule at every order as on TensorFlow and PyTorch,
            # replaces it. That call is the next level's: it ends where
            # the inputs are no longer differentiated.
            leaves = list(inner(*flat)[: len(leaves)])

        def rule(cotangents):
            # An eager gradient runs the rule's callbacks in its backward
            # pass, after R's forward code returned: a collection there
            # keeps none of that code's values (_memory). Only when due: a
            # callback costs 70-300 us a step at n = 1
            # (bench/results/2026-11-28-to-12-01-history.md).
            if eager and _memory.rule_traced():
                jax.debug.callback(_memory.at_backward)
            upstream = _bridge.fill_upstream(list(cotangents), leaves)
            return tuple(backward(upstream, _in_rule_trace(saved)))

        return tuple(leaves), rule

    return inner, state


def _differentiated(x):
    """Whether ``x`` is a tracer of JAX's differentiation (``jax.grad``,
    ``jax.vjp``, ``jax.linearize``): its forward-mode tracers, named so
    since JAX 0.4 (``LinearizeTracer`` is not exported)."""
    return type(x).__name__ in ("JVPTracer", "LinearizeTracer")


def _in_rule_trace(saved):
    """Concrete saved arrays as values of the trace JAX runs the rule in.
    Computed on as they are, they would run eagerly inside that trace, and
    each such call leaves an entry keyed by the trace in JAX's jit cache:
    one per eager gradient, up to 8,192 (about 20 MB). A concrete array has
    no derivative to keep, so stop_gradient changes nothing; a tracer (under
    jit, or a gradient of a gradient) passes as it is."""
    return [
        lax.stop_gradient(s)
        if isinstance(s, jax.Array) and not isinstance(s, jax.core.Tracer)
        else s
        for s in saved
    ]


def batching(flat):
    """The batching transform ``flat`` is under (``jax.vmap``), or None."""
    if any(isinstance(x, jax.interpreters.batching.BatchTracer) for x in flat):
        return "jax.vmap() (op_vectorized_map())"
    return None


def finish(call):
    """Nothing to add on JAX."""
    return call


def vjp(flat_fn, xs, make_upstream):
    """Values of ``flat_fn(*xs)`` and the gradients of
    ``sum(upstream * values)``, ``upstream = make_upstream(values)``."""
    values, pullback = jax.vjp(lambda *a: tuple(flat_fn(*a)), *xs)
    upstream = make_upstream(list(values))
    if upstream is None:
        upstream = [jax.numpy.ones_like(v) for v in values]
    grads = pullback(tuple(upstream))
    return list(values), list(grads)


def compile(fn):
    """``fn`` compiled (R runs while it is traced), reading the Keras
    variables it reads at every call (:class:`_Compiled`)."""
    return _Compiled(fn)


class _Compiled:
    """``fn`` under ``jax.jit``. A Keras variable read inside a jit trace
    is a constant of it (the array it held then): later calls would use
    that value after ``$assign()``. So the values of the variables ``fn``
    reads are arguments of the compiled function, handed to ``fn``
    through a ``keras.StatelessScope``, and what ``fn`` assigns comes back
    out and is assigned after the call, as Keras' own JAX trainer does. A
    variable a trace meets first is a constant of that trace (its value
    now: right for this call) and an argument from the next call on,
    which traces again (the replay, not R, where ``fn`` replays)."""

    def __init__(self, fn):
        self._fn = fn
        self._read = []  # the variables passed in, in their order
        self._assigned = []  # the variables assigned, by output slot
        self._jitted = jax.jit(self._run)

    def __call__(self, *args):
        if any(isinstance(x, jax.core.Tracer) for x in args):
            # Inside another trace, which compiles it (and maps the
            # variables, as fit() does): a jit of our own would keep that
            # trace's values in its cache.
            return self._fn(*args)
        values = [v.value for v in self._read]
        try:
            out, updates = self._jitted(values, *args)
        except Exception as exc:
            raise_host_stop(exc)
            raise
        for slot, value in updates.items():
            self._assigned[slot].assign(value)
        return out

    def _run(self, values, *args):
        with _VariableScope(self, self._read[: len(values)], values) as scope:
            out = self._fn(*args)
        updates = {}
        for variable in scope.assigned:
            slot = _position(self._assigned, variable)
            if slot is None:
                slot = len(self._assigned)
                self._assigned.append(variable)
            updates[slot] = scope.get_current_value(variable)
        return out, updates


class _VariableScope(keras.StatelessScope):
    """The values passed in for the variables known to ``owner`` (a
    :class:`_Compiled`); a variable read that is not among them is
    passed from the next call on (or read from the scope around, if any);
    assignments are kept in the scope and listed in ``assigned``."""

    def __init__(self, owner, variables, values):
        super().__init__(state_mapping=list(zip(variables, values)))
        self._owner = owner
        self.assigned = []

    def get_current_value(self, variable):
        value = super().get_current_value(variable)
        if value is None:
            if _position(self._owner._read, variable) is None:
                self._owner._read.append(variable)
            if self.original_scope is not None:
                value = self.original_scope.get_current_value(variable)
        return value

    def add_update(self, update):
        super().add_update(update)
        if _position(self.assigned, update[0]) is None:
            self.assigned.append(update[0])


def _position(variables, variable):
    """The index of ``variable`` in ``variables`` (by identity), or None."""
    for i, v in enumerate(variables):
        if v is variable:
            return i
    return None


def symbolic_run():
    """The context R runs in while it is traced on Keras symbolic tensors.
    What R computes there from concrete arrays alone (``op_sum(y)`` of a
    ``y`` it closes over) is computed at once, as a constant of the
    recording: JAX would otherwise stage it into whatever transform is
    running (the body of a ``lax.scan`` that called the function), and
    the recording would keep that transform's tracer, which leaks at the
    next replay elsewhere (JAX's ``test_initial_style_vmap_3``)."""
    return jax.ensure_compile_time_eval()


def no_grad():
    """Nothing to switch off: JAX differentiates only under its transforms."""
    return contextlib.nullcontext()


def enable_float64():
    """Turn on ``jax_enable_x64`` and keep float64 results float64."""
    previous = {
        "promotion": _keras_internals.float64_promotion_off(),
        "x64": bool(jax.config.jax_enable_x64),
    }
    jax.config.update("jax_enable_x64", True)
    return previous


def restore_float64(previous):
    """Undo :func:`enable_float64`."""
    _keras_internals.restore_float64_promotion(previous["promotion"])
    jax.config.update("jax_enable_x64", previous["x64"])


def nbytes(x):
    """Bytes of a concrete array (tracers hold none); size * itemsize:
    ``x.nbytes`` is ~10x slower, a cost on every op called from R."""
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return x.size * x.dtype.itemsize
    return 0


def device_memory_in_use():
    """A function giving the bytes in use on JAX's default device: its
    allocator's count on a GPU or TPU; on the CPU, which reports none, the
    bytes of the arrays alive (``jax.live_arrays()``, ~0.3 us an array, so
    read at most every 10 ms)."""
    device = jax.local_devices()[0]  # this process's (jax.distributed)
    stats = device.memory_stats()
    if stats and "bytes_in_use" in stats:
        return lambda: device.memory_stats()["bytes_in_use"]

    def live_bytes():
        return sum(a.size * a.dtype.itemsize for a in jax.live_arrays())

    live_bytes.seconds = 0.01
    return live_bytes


def is_abstract(x):
    """Whether ``x`` is a tracer (``jax.jit``, ``jax.grad``, ``jax.vmap``),
    whose value R can't read."""
    return isinstance(x, jax.core.Tracer)


def host_call(fn, args, out_specs):
    """``fn`` of NumPy arrays as ``jax.pure_callback`` on ``args``; under
    ``jax.vmap`` it is called once per element. JAX may skip a callback
    whose outputs are unused, or run one again: R's ``f`` should not count
    on running once. On a GPU each call copies to the host and back."""
    symbolic = any(
        not isinstance(d, (int, np.integer)) for shape, _ in out_specs for d in shape
    )
    if symbolic and not _keras_internals.in_symbolic_scope():
        # A symbolic dimension outside Keras' shape inference: jax.export
        # (Keras' model.export()) traces for any batch size, to run the
        # computation where R is not; JAX would fail while lowering the
        # callback ("std::bad_cast").
        raise ThreadError(thread="jax.export", host="exported")
    shapes = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in out_specs]
    return jax.pure_callback(
        lambda *arrays: tuple(fn(*arrays)),
        tuple(shapes),
        *args,
        vmap_method="sequential",
    )


def from_host(array):
    """A host callback's NumPy input as the array R's code expects."""
    return jax.numpy.asarray(array)


def dense(x):
    """``x``, or a sparse array's dense value (Keras infers shapes on
    sparse placeholders for operands it takes for sparse)."""
    if isinstance(x, jax.experimental.sparse.JAXSparse):
        return x.todense()
    return x
