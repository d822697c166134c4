"""PyTorch: the package's own ``torch.autograd.Function``.

Keras' torch wrapper takes one output only and hides errors in ``f`` behind
NaN gradients, so customgrad does not use it.  The forward runs without
autograd recording; what the backward needs is kept with
``save_for_backward`` (a closure holding outputs would be a reference cycle
through the autograd graph).  When backward itself is differentiated
(``create_graph=True``), a replayed trace runs its forward again on the
saved inputs with autograd on, so that the gradient depends on the inputs
and can be differentiated again; R's ``f`` runs with autograd on from the
start instead (``forward_history``), and is not run again.
"""

import contextlib

import keras
import torch

from customgrad import _bridge, _keras_internals, _memory
from customgrad.errors import TransformError

FILL_NONE = False
# PyTorch never hands grad variables.
GRAD_GETS_VARIABLES = False
# A traced function's gradient called eagerly from R replays eagerly.
COMPILES_GRADIENT_REPLAYS = False


class _Call:
    """State of one call: what backward needs from forward."""

    __slots__ = (
        "fn", "in_spec", "out_spec", "backward", "n_inputs", "n_outputs",
        "outputs_like",
    )  # fmt: skip

    def __init__(self, fn, in_spec):
        self.fn = fn
        self.in_spec = in_spec


class _Function(torch.autograd.Function):
    """The custom gradient as PyTorch's autograd.Function, in the form
    torch.func's transforms need (forward without ctx, setup_context): the
    replay runs PyTorch operations only, so vmap batches forward and
    backward as they are (generate_vmap_rule). forward returns what
    backward needs after the value, as setup_context may only save inputs
    and outputs."""

    generate_vmap_rule = True

    @staticmethod
    def forward(call, *flat):
        leaves, call.out_spec, saved, call.backward = call.fn.forward(
            list(flat), call.in_spec
        )
        call.n_inputs, call.n_outputs = len(flat), len(leaves)
        # What a missing upstream's zeros are like (not the outputs: a
        # reference cycle through the graph).
        call.outputs_like = [(v.shape, v.dtype, v.device) for v in leaves]
        # Views: with setup_context, an input returned as it is can't be
        # saved (an identity's value), nor an output (what grad keeps).
        inputs = {id(x) for x in flat}
        leaves = [v.view_as(v) if id(v) in inputs else v for v in leaves]
        return (*leaves, *(s.view_as(s) for s in saved))

    @staticmethod
    def setup_context(ctx, inputs, output):
        call = inputs[0]
        ctx.call = call
        saved = output[call.n_outputs :]
        ctx.mark_non_differentiable(*saved)
        ctx.save_for_backward(*inputs[1:], *saved)

    @staticmethod
    def backward(ctx, *upstream):
        # The step's R code has returned: a due collection runs here.
        _memory.at_backward()
        call = ctx.call
        tensors = ctx.saved_tensors
        flat, saved = list(tensors[: call.n_inputs]), list(tensors[call.n_inputs :])
        backward = call.backward
        if torch.is_grad_enabled() and not getattr(backward, "calls_r", False):
            # create_graph=True: recompute a replay from inputs that carry
            # history. R's f ran with autograd on (forward_history()), so
            # what its grad captured carries history already.
            _, _, saved, backward = call.fn.forward(flat, call.in_spec)
        upstream = [
            torch.zeros(shape, dtype=dtype, device=device) if u is None else u
            for u, (shape, dtype, device) in zip(upstream, call.outputs_like)
        ]
        grads = backward(upstream, saved)
        return (None, *grads)

    @staticmethod
    def jvp(ctx, *tangents):
        raise TransformError(
            kind="forward",
            transform="torch.func.jvp(), torch.func.jacfwd(), keras.ops.jvp()",
            reverse="backward(), torch.func.vjp()",
            why="its rule gives vector-Jacobian products only",
        )


class _EagerFunction(_Function):
    """The same in PyTorch's older form (forward takes ctx), for calls
    outside torch.func's transforms: ``apply`` of a Function with
    ``setup_context`` binds its arguments with ``inspect.signature`` at
    every call (~25 us, a tenth of a small step)."""

    generate_vmap_rule = False
    setup_context = torch.autograd.Function.setup_context  # i.e. none

    @staticmethod
    def forward(ctx, call, *flat):
        output = _Function.forward(call, *flat)
        _Function.setup_context(ctx, (call, *flat), output)
        # No zeros made for the saved tensors' upstream, which backward
        # ignores (one value's worth of memory a step); a value's missing
        # upstream is filled in backward.
        ctx.set_materialize_grads(False)
        return output


# The graph nodes of the custom gradients (``_reaches_other_leaf``).
_CUSTOM_NODES = (_Function._backward_cls, _EagerFunction._backward_cls)


def custom_gradient(fn):
    """Differentiable callable over ``fn.forward`` (see ``_trace``)."""

    def call(*args):
        tensors, in_spec = _bridge.flat_inputs(args)
        state = _Call(fn, in_spec)
        _recording.append(
            torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        )
        function = _Function if _in_functorch() else _EagerFunction
        try:
            result = function.apply(state, *tensors)
        finally:
            _recording.pop()
        return _bridge.pack(state.out_spec, list(result[: state.n_outputs]))

    return call


# Whether each call in progress (innermost last) is recorded by autograd.
_recording = []


def forward_history():
    """The context R's ``f`` runs in: autograd on when the call is
    recorded, so that the tensors ``grad`` captures carry history to the
    inputs and the gradient can be differentiated again (create_graph)
    without running ``f`` again, where R's state may differ."""
    if _recording and _recording[-1]:
        return torch.enable_grad()
    return contextlib.nullcontext()


def finish(call):
    """Nothing to add on PyTorch."""
    return call


def vjp(flat_fn, xs, make_upstream):
    """Values of ``flat_fn(*xs)`` and the gradients of
    ``sum(upstream * values)``, ``upstream = make_upstream(values)``, with
    ``torch.autograd.grad`` on fresh leaves (or views of inputs that carry
    history); differentiable again, with grad mode on, when an input
    carries history, the call is inside another's ``flat_fn`` (an outer
    differentiation follows, maybe with respect to what ``flat_fn``
    closes over) or the values depend on a tensor that requires grad other
    than the inputs (a model's weights ``flat_fn`` reads: the caller may
    differentiate the gradient with respect to them).  Otherwise the
    results hold no graph: R may keep them until its collector runs."""
    if _in_functorch():
        # Inside vmap (per-example gradients) or another torch.func
        # transform, where requires_grad_() is refused: torch.func's own.
        values, pullback = torch.func.vjp(lambda *a: tuple(flat_fn(*a)), *xs)
        upstream = make_upstream(list(values))
        if upstream is None:
            upstream = [torch.ones_like(v) for v in values]
        grads = pullback(tuple(upstream))
        return list(values), list(grads)
    create_graph = torch.is_grad_enabled() and (
        _vjp_depth[0] > 0 or any(x.requires_grad for x in xs)
    )
    with torch.enable_grad():
        xs = [_input(x, create_graph) for x in xs]
        _vjp_depth[0] += 1
        try:
            values = flat_fn(*xs)
        finally:
            _vjp_depth[0] -= 1
    if not create_graph and torch.is_grad_enabled():
        create_graph = _reaches_other_leaf(values, xs)
    # None: autograd's own ones for a one-element value.
    upstream = make_upstream(values) or [None] * len(values)
    pairs = [(v, u) for v, u in zip(values, upstream) if v.requires_grad]
    if pairs:
        grads = torch.autograd.grad(
            [v for v, _ in pairs],
            xs,
            grad_outputs=[u for _, u in pairs],
            create_graph=create_graph,
            allow_unused=True,
        )
    else:
        grads = [None] * len(xs)
    grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]
    if not create_graph:
        values = [v.detach() for v in values]
        grads = [g.detach() for g in grads]
    return values, grads


# vjp() calls in progress (a gradient of a gradient).
_vjp_depth = [0]


def _reaches_other_leaf(values, inputs):
    """Whether the autograd graph of ``values`` reaches a tensor that
    requires grad other than ``inputs`` (an ``AccumulateGrad`` node of
    another leaf), or a custom gradient whose rule may read one (its
    captures are in its rule, not in the graph)."""
    own = {id(x) for x in inputs}
    seen = set()
    stack = [v.grad_fn for v in values if v.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if isinstance(node, _CUSTOM_NODES) and _rule_may_read_grad(node):
            return True
        leaf = getattr(node, "variable", None)
        if leaf is not None:
            if id(leaf) not in own:
                return True
            continue
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


def _rule_may_read_grad(ctx):
    """Whether the rule of a custom gradient's node (``ctx``) may read a
    tensor that requires grad: a traced rule that captured one (a tensor,
    or a Keras variable's value), or R's ``grad`` (untraced: it may read
    anything)."""
    constants = getattr(ctx.call.backward, "rule_constants", None)
    if constants is None:
        return True
    for x in constants():
        if isinstance(x, keras.Variable):
            x = x.value
        if isinstance(x, torch.Tensor) and x.requires_grad:
            return True
    return False


def _input(x, keep_history):
    """A tensor to differentiate with respect to, without touching ``x``."""
    if keep_history and x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def _in_functorch():
    """Whether a torch.func transform (vmap, grad, jacrev, ...) is running:
    torch.func's interpreter stack has a level (``maybe_current_level``,
    not in torch's public API; test_adapters checks it)."""
    return torch._C._functorch.maybe_current_level() is not None


def batching(flat):
    """The torch.func transform running, or None: R can't run under one."""
    if _in_functorch():
        return "a torch.func transform (vmap, grad, jacrev; op_vectorized_map())"
    return None


def compile(fn):
    """``fn`` itself: PyTorch's compiler is not used."""
    return fn


def no_grad():
    """Autograd recording off."""
    return torch.no_grad()


def enable_float64():
    """Keep float64 results float64."""
    return _keras_internals.float64_promotion_off()


def restore_float64(previous):
    """Undo :func:`enable_float64`."""
    _keras_internals.restore_float64_promotion(previous)


def nbytes(x):
    """Bytes of a tensor; 0 for anything else."""
    if isinstance(x, torch.Tensor):
        return x.nelement() * x.element_size()
    return 0


def device_memory_in_use():
    """A function giving the bytes PyTorch's allocator holds for the device
    Keras puts tensors on (CUDA or Apple's MPS), or None on the CPU, where
    PyTorch counts nothing."""
    device = str(keras.ops.zeros(()).device)  # where Keras puts tensors
    if device.startswith("cuda"):
        return lambda: torch.cuda.memory_allocated(device)
    if device.startswith("mps"):
        return torch.mps.current_allocated_memory
    return None


def is_abstract(x):
    """False: PyTorch runs eagerly, so R reads every tensor's value and no
    host callback is needed (``_host``)."""
    return False


def dense(x):
    """``x`` as it is (``_host`` asks every adapter)."""
    return x
