"""Custom gradients under the backends' transforms: vectorising maps,
per-example gradients, forward mode (the issue "Custom gradients under
vmap, per-example gradients and forward mode"). ``sq``'s rule is
deliberately not autodiff's (3x, not 2x), so a dropped rule shows."""

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _autodiff
from customgrad.errors import TransformError
from test_adapters import reply

X = np.array([1.0, 2.0, -0.5], "float32")


def sq():
    def forward(x, tracing=False, **hints):
        return reply(x * x, lambda upstream, variables: [upstream * 3.0 * x])

    return customgrad.custom_gradient(forward)


def tensor(x=X):
    return keras.ops.convert_to_tensor(x)


@pytest.mark.backend("jax")
def test_jax_jacfwd_is_refused_as_forward_mode():
    import jax

    # jax.vmap, per-example gradients and jvp: test-transforms.R.
    with pytest.raises(TransformError, match="forward"):
        jax.jacfwd(sq())(tensor())


@pytest.mark.backend("tensorflow")
def test_tensorflow_vectorized_map_refuses_the_gradient_not_the_value():
    import tensorflow as tf

    h = sq()
    # The value is right.
    np.testing.assert_allclose(tf.vectorized_map(h, tensor()), X * X)
    # A gradient through it is refused, never autodiff's 2x.
    x = tensor()
    with pytest.raises(LookupError, match="customgrad_error_transform"):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(tf.vectorized_map(h, x))
        tape.gradient(y, x)
    # customgrad's own gradient says so with its class.
    grad = _autodiff.value_and_grad(
        lambda x: keras.ops.sum(tf.vectorized_map(h, x)), positions=[1], wrt=[0]
    )
    with pytest.raises(TransformError, match="vectorized_map"):
        grad(None, x)
    # Forward mode is refused.
    with pytest.raises(TransformError, match="forward"):
        keras.ops.jvp(h, (x,), (x,))
    with (
        pytest.raises(TransformError, match="forward"),
        tf.autodiff.ForwardAccumulator(x, x),
    ):
        h(x)
    # A map that loops keeps the rule.
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(keras.ops.map(h, x))
    np.testing.assert_allclose(tape.gradient(y, x), 3 * X)


@pytest.mark.backend("torch")
def test_torch_func_transforms_keep_the_rule_and_refuse_forward_mode():
    import torch

    h = sq()
    x = tensor()
    np.testing.assert_allclose(torch.func.vmap(h)(x), X * X)
    np.testing.assert_allclose(torch.func.grad(lambda x: h(x).sum())(x), 3 * X)
    np.testing.assert_allclose(
        torch.func.grad(lambda x: torch.func.vmap(h)(x).sum())(x), 3 * X
    )
    np.testing.assert_allclose(torch.func.jacrev(h)(x), np.diag(3 * X))
    w = tensor(np.float32(2.0))
    per = torch.func.vmap(lambda xi: torch.func.grad(lambda w: h(xi * w))(w))(x)
    np.testing.assert_allclose(per, 3 * X * X * 2.0)
    # autograd as before, a gradient of a gradient included
    xg = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(h(xg).sum(), xg, create_graph=True)
    np.testing.assert_allclose(g.detach(), 3 * X)
    (gg,) = torch.autograd.grad(g.sum(), xg)
    np.testing.assert_allclose(gg, [3.0, 3.0, 3.0])
    for forward_mode in (
        lambda: torch.func.jvp(h, (x,), (x,)),
        lambda: torch.func.jacfwd(h)(x),
    ):
        with pytest.raises(TransformError, match="forward"):
            forward_mode()


@pytest.mark.backend("torch")
def test_torch_eager_calls_skip_the_transform_form(monkeypatch):
    # Outside torch.func, the older autograd.Function form: apply() of the
    # setup_context form calls inspect.signature at every call.
    import inspect

    import torch

    h = sq()
    x = tensor().requires_grad_(True)
    h(x)  # traced once, first
    calls = []
    signature = inspect.signature
    monkeypatch.setattr(
        inspect, "signature", lambda *a, **k: calls.append(a) or signature(*a, **k)
    )
    h(x).sum().backward()
    np.testing.assert_allclose(x.grad, 3 * X)
    assert calls == []
    torch.func.vmap(h)(tensor())
    assert calls != []
