"""JAX: ``jax.custom_gradient`` on flat arrays.

JAX calls the gradient rule while it traces the forward pass, so under
``jax.grad`` the backward program (or R's ``grad``) runs at forward time,
on tracers.  JAX wants a zero array, never None, for an input without a
gradient.
"""

import jax

from customgrad import _bridge

FILL_NONE = True


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""
    # Wrapped once, not per call; each call's state is on a stack (JAX runs
    # `inner` at once, while tracing).
    calls = []

    @jax.custom_gradient
    def inner(*flat):
        state = calls[-1]
        # Under jax.grad, JAX may hand the primal Python float back here.
        flat = [_bridge.to_tensor(x) for x in flat]
        leaves, spec, saved, backward = fn.forward(flat, state["in_spec"])
        state["spec"] = spec

        def rule(cotangents):
            upstream = _bridge.fill_upstream(list(cotangents), leaves)
            return tuple(backward(upstream, saved))

        return tuple(leaves), rule

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        state, result = _bridge.call_on_stack(calls, inner, tensors, in_spec)
        return _bridge.pack(state["spec"], list(result))

    return call


def finish(call):
    """Nothing to add on JAX."""
    return call
