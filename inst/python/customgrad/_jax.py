"""JAX: ``jax.custom_gradient`` on flat arrays.

JAX calls the gradient rule while it traces the forward pass, so under
``jax.grad`` the R ``grad`` runs at forward time, on tracers; under
``jax.jit`` both run only while tracing.  JAX wants a zero array, never
None, for an input without a gradient.
"""

import jax

from customgrad import _bridge


def custom_gradient(forward):
    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        out = {}

        @jax.custom_gradient
        def inner(*flat):
            # Under jax.grad, JAX may hand the primal Python float back here.
            inputs = _bridge.pack(in_spec, [_bridge.to_tensor(x) for x in flat])
            leaves, spec, grad = _bridge.call_forward(forward, inputs)
            out["spec"] = spec

            def rule(cotangents):
                upstream = _bridge.fill_upstream(list(cotangents), leaves)
                upstream = _bridge.pack(spec, upstream)
                return tuple(_bridge.call_grad(grad, upstream, inputs, True))

            return tuple(leaves), rule

        result = inner(*tensors)
        return _bridge.pack(out["spec"], list(result))

    return call
