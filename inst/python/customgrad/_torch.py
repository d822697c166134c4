"""PyTorch: the package's own ``torch.autograd.Function``.

Keras' torch wrapper takes one output only and hides errors in ``f`` behind
NaN gradients, so customgrad does not use it.  ``f`` runs once in forward
(without autograd recording); when backward itself is differentiated
(``create_graph=True``), ``f`` runs again on the saved inputs with autograd
on, so that ``grad``'s result depends on the inputs and can be
differentiated again.
"""

import torch

from customgrad import _bridge


class _Call:
    """State of one call: what backward needs from forward."""

    __slots__ = ("forward", "in_spec", "out_spec", "grad")

    def __init__(self, forward, in_spec):
        self.forward = forward
        self.in_spec = in_spec


class _RFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *flat):
        inputs = _bridge.pack(call.in_spec, flat)
        leaves, call.out_spec, call.grad = _bridge.call_forward(call.forward, inputs)
        ctx.call = call
        ctx.save_for_backward(*flat)
        return tuple(leaves)

    @staticmethod
    def backward(ctx, *upstream):
        call = ctx.call
        inputs = _bridge.pack(call.in_spec, ctx.saved_tensors)
        grad = call.grad
        if torch.is_grad_enabled():
            # create_graph=True: rebuild grad from inputs that carry history.
            _, _, grad = _bridge.call_forward(call.forward, inputs)
        upstream = _bridge.pack(call.out_spec, list(upstream))
        grads = _bridge.call_grad(grad, upstream, inputs, False)
        return (None, *grads)


def custom_gradient(forward):
    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        state = _Call(forward, in_spec)
        result = _RFunction.apply(state, *tensors)
        return _bridge.pack(state.out_spec, list(result))

    return call
