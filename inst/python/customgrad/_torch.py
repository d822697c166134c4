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

    __slots__ = ("forward", "in_spec", "out_spec", "grad", "backward", "kept")

    def __init__(self, forward, in_spec, backward):
        self.forward = forward
        self.in_spec = in_spec
        # Whether a backward pass can follow (grad mode on, an input that
        # requires grad): R records grad ahead only then.
        self.backward = backward


class _RFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *flat):
        inputs = _bridge.pack(call.in_spec, flat)
        leaves, call.out_spec, call.grad = _bridge.call_forward(
            call.forward, inputs, record=call.backward
        )
        ctx.call = call
        # The values of f that grad needs are saved like the inputs: autograd
        # frees them after the backward pass, even while R still holds the
        # result (and with it this graph) until its next garbage collection.
        kept = call.grad.values
        call.kept = [k for k, v in kept.items() if isinstance(v, torch.Tensor)]
        ctx.save_for_backward(*flat, *(kept.pop(k) for k in call.kept))
        return tuple(leaves)

    @staticmethod
    def backward(ctx, *upstream):
        call = ctx.call
        saved = ctx.saved_tensors
        flat = saved[: len(saved) - len(call.kept)]
        inputs = _bridge.pack(call.in_spec, flat)
        grad = call.grad
        grad.values.update(zip(call.kept, saved[len(flat) :]))
        if torch.is_grad_enabled():
            # create_graph=True: rebuild grad from inputs that carry history.
            _, _, grad = _bridge.call_forward(call.forward, inputs)
        upstream = _bridge.pack(call.out_spec, list(upstream))
        grads = _bridge.call_grad(grad, upstream, inputs, False)
        return (None, *grads)


def custom_gradient(forward):
    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        state = _Call(forward, in_spec, backward)
        result = _RFunction.apply(state, *tensors)
        return _bridge.pack(state.out_spec, list(result))

    return call
