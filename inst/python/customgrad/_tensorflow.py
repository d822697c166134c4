"""TensorFlow: ``tf.custom_gradient`` on flat tensors.

Inputs are converted to tensors before the custom-gradient boundary, so a
Keras variable passed as an input is read outside ``f`` and its gradient
flows through that read.  Variables that ``f`` reads itself follow TF's
``variables=`` contract.
"""

import tensorflow as tf

from customgrad import _bridge
from customgrad.errors import VariablesError

# A gradient TensorFlow does not need may stay None.
FILL_NONE = False


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
        raise VariablesError(
            f"`grad` must return {len(variables)} variable gradient(s), one "
            f"per variable `f` read, but it returned {len(var_grads)}."
        )
    return [None if g is None else tf.convert_to_tensor(g) for g in var_grads]


def finish(call):
    """Inside tf.function, AutoGraph must leave the bridge as it is."""
    return tf.autograph.experimental.do_not_convert(call)
