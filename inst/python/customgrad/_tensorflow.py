"""TensorFlow: ``tf.custom_gradient`` on flat tensors.

Inputs are converted to tensors before the custom-gradient boundary, so a
Keras variable passed as an input is read outside ``f`` and its gradient
flows through that read.  Variables that ``f`` reads itself follow TF's
``variables=`` contract.
"""

import contextlib

import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from customgrad import _bridge
from customgrad.errors import VariablesError

# A gradient TensorFlow does not need may stay None.
FILL_NONE = False
# tf.function traces R once per signature.
# TensorFlow hands grad the variables f read (variables=).
GRAD_GETS_VARIABLES = True


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""
    # Decorated once, not per call (tf.custom_gradient is ~60 us to apply).
    # Each call's state is on a stack: TensorFlow runs `inner` at once.
    calls = []

    @tf.custom_gradient
    def inner(*flat):
        state = calls[-1]
        leaves, spec, saved, backward = fn.forward(list(flat), state["in_spec"])
        state["spec"] = spec

        def grad_fn(*upstream, variables=None):
            upstream = _bridge.fill_upstream(upstream, leaves)
            if variables:
                grads, var_grads = backward(upstream, saved, list(variables))
                return grads, _variable_gradients(var_grads, variables)
            return backward(upstream, saved)

        return (leaves[0] if len(leaves) == 1 else tuple(leaves)), grad_fn

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        # Read variables here, outside f: the read is taped and the gradient
        # flows to the variable; only variables f reads itself follow TF's
        # variables= contract.
        tensors = [
            tf.convert_to_tensor(t) if isinstance(t, tf.Variable) else t
            for t in tensors
        ]
        state, result = _bridge.call_on_stack(calls, inner, tensors, in_spec)
        flat_out = [result] if state["spec"].num_leaves() == 1 else list(result)
        return _bridge.pack(state["spec"], flat_out)

    return finish(call)


def _variable_gradients(var_grads, variables):
    if not isinstance(var_grads, (list, tuple)):
        var_grads = [var_grads]
    if len(var_grads) != len(variables):
        raise VariablesError(expected=len(variables), returned=len(var_grads))
    # Cast to each variable's dtype, checked like the inputs' gradients.
    return [
        None
        if g is None
        else _bridge.cast_gradient(
            tf.convert_to_tensor(g), v.dtype.name, f"variable {i}"
        )
        for i, (g, v) in enumerate(zip(var_grads, variables), start=1)
    ]


def finish(call):
    """Inside tf.function, AutoGraph must leave the bridge as it is."""
    return tf.autograph.experimental.do_not_convert(call)


def vjp(flat_fn, xs, make_upstream):
    """Values of ``flat_fn(*xs)`` and the gradients of
    ``sum(upstream * values)``, ``upstream = make_upstream(values)``."""
    with tf.GradientTape() as tape:
        # Distinct tensors per argument, even if the caller passed one
        # tensor twice; an enclosing tape records the identity too.
        xs = [tf.identity(x) for x in xs]
        for x in xs:
            tape.watch(x)
        values = flat_fn(*xs)
    upstream = make_upstream(values)
    grads = tape.gradient(
        values,
        xs,
        output_gradients=upstream,
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    return values, grads


def compile(fn):
    """``fn`` compiled (R runs while it is traced)."""
    return tf.function(fn, autograph=False)


def no_grad():
    """Nothing to switch off: TensorFlow records only under a tape."""
    return contextlib.nullcontext()


def enable_float64():
    """TensorFlow computes in float64 as it is."""
    return None


def restore_float64(previous):
    """Nothing to undo."""


def on_main_thread(fn):
    """``fn()``, from a replica's thread of a ``tf.distribute`` strategy
    run on the main thread: ``merge_call()`` pauses every replica (each
    calls it, as each meets the same missing trace) and runs the first
    one's ``fn`` there. Elsewhere (another thread, where the default
    replica context would run it in place) ``fn()`` runs here."""
    if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
        return fn()
    return tf.distribute.get_replica_context().merge_call(lambda strategy: fn())


def nbytes(x):
    """Bytes of an eager tensor (a check against tf.Tensor is ~10x slower);
    0 for anything else."""
    if isinstance(x, EagerTensor):
        n = x.shape.num_elements()
        return (n or 0) * x.dtype.size
    return 0


def allocator_in_use():
    """A function giving the bytes TensorFlow's CPU allocator holds, or None
    where it has no statistics."""
    info = tf.config.experimental.get_memory_info
    try:
        info("CPU:0")
    except (ValueError, RuntimeError):
        return None
    return lambda fresh=False: info("CPU:0")["current"]
