"""JAX: ``jax.custom_gradient`` on flat arrays.

JAX calls the gradient rule while it traces the forward pass, so under
``jax.grad`` the backward program (or R's ``grad``) runs at forward time,
on tracers; what must happen in the backward pass itself (R's due
collection, ``_memory``) goes in a callback there.  JAX wants a zero array,
never None, for an input without a gradient.
"""

import contextlib

import jax
from jax import lax

from customgrad import _bridge, _keras_internals, _memory
from customgrad.errors import TransformError

FILL_NONE = True
# jax.jit traces R once per signature.
# JAX never hands grad variables.
GRAD_GETS_VARIABLES = False
# A traced function's gradient called eagerly from R replays eagerly.
COMPILES_GRADIENT_REPLAYS = False


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

        def rule(cotangents):
            # An eager gradient runs the rule's callbacks in its backward
            # pass, after R's forward code returned: a collection there
            # keeps none of that code's values (_memory). Only when due: a
            # callback costs 0.1-0.3 ms a step (bench/README.md).
            if eager and _memory.rule_traced():
                jax.debug.callback(_memory.at_backward)
            upstream = _bridge.fill_upstream(list(cotangents), leaves)
            return tuple(backward(upstream, _in_rule_trace(saved)))

        return tuple(leaves), rule

    return inner, state


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
    """``fn`` compiled (R runs while it is traced)."""
    return jax.jit(fn)


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
