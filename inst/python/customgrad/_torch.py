"""PyTorch: the package's own ``torch.autograd.Function``.

Keras' torch wrapper takes one output only and hides errors in ``f`` behind
NaN gradients, so customgrad does not use it.  The forward runs without
autograd recording; what the backward needs is kept with
``save_for_backward`` (a closure holding outputs would be a reference cycle
through the autograd graph).  When backward itself is differentiated
(``create_graph=True``), the forward runs again on the saved inputs with
autograd on, so that the gradient depends on the inputs and can be
differentiated again.
"""

import torch

from customgrad import _bridge

FILL_NONE = False


class _Call:
    """State of one call: what backward needs from forward."""

    __slots__ = ("fn", "in_spec", "out_spec", "backward", "n_inputs")

    def __init__(self, fn, in_spec):
        self.fn = fn
        self.in_spec = in_spec


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *flat):
        leaves, call.out_spec, saved, call.backward = call.fn.forward(
            list(flat), call.in_spec
        )
        call.n_inputs = len(flat)
        ctx.call = call
        ctx.save_for_backward(*flat, *saved)
        return tuple(leaves)

    @staticmethod
    def backward(ctx, *upstream):
        call = ctx.call
        tensors = ctx.saved_tensors
        flat, saved = list(tensors[: call.n_inputs]), list(tensors[call.n_inputs :])
        backward = call.backward
        if torch.is_grad_enabled():
            # create_graph=True: recompute from inputs that carry history.
            _, _, saved, backward = call.fn.forward(flat, call.in_spec)
        grads = backward(list(upstream), saved)
        return (None, *grads)


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        state = _Call(fn, in_spec)
        result = _Function.apply(state, *tensors)
        return _bridge.pack(state.out_spec, list(result))

    return call


def finish(call):
    """Nothing to add on PyTorch."""
    return call
