"""JAX: ``jax.custom_gradient`` on flat arrays.

JAX calls the gradient rule while it traces the forward pass, so under
``jax.grad`` the R ``grad`` runs at forward time, on tracers; under
``jax.jit`` both run only while tracing.  JAX wants a zero array, never
None, for an input without a gradient.
"""

import jax

from customgrad import _bridge


def custom_gradient(forward):
    # Wrapped once, not per call; each call's state is on a stack (JAX runs
    # `inner` at once, while tracing).
    calls = []

    @jax.custom_gradient
    def inner(*flat):
        state = calls[-1]
        # Under jax.grad, JAX may hand the primal Python float back here.
        inputs = _bridge.pack(state["in_spec"], [_bridge.to_tensor(x) for x in flat])
        leaves, spec, grad = _bridge.call_forward(forward, inputs)
        state["spec"] = spec

        def rule(cotangents):
            upstream = _bridge.fill_upstream(list(cotangents), leaves)
            upstream = _bridge.pack(spec, upstream)
            return tuple(_bridge.call_grad(grad, upstream, inputs, True))

        return tuple(leaves), rule

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        state, result = _bridge.call_on_stack(calls, inner, tensors, in_spec)
        return _bridge.pack(state["spec"], list(result))

    return call
