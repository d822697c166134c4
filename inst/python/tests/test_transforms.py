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
from test_adapters import BACKEND, reply

X = np.array([1.0, 2.0, -0.5], "float32")


def sq_forward(read_value=False):
    def forward(x, tracing=False, **hints):
        if read_value:  # fails on symbolic tensors: R runs at every call
            float(keras.ops.convert_to_numpy(keras.ops.sum(x)))

        def grad(upstream, variables):
            return [upstream * 3.0 * x]

        return reply(x * x, grad)

    return forward


def sq(read_value=False):
    return customgrad.custom_gradient(sq_forward(read_value))


def tensor(x=X):
    return keras.ops.convert_to_tensor(x)


@pytest.mark.backend("jax")
def test_jax_vmap_keeps_the_rule_and_refuses_forward_mode():
    import jax

    h = sq()
    g = jax.grad(lambda x: jax.numpy.sum(jax.vmap(h)(x)))(tensor())
    np.testing.assert_allclose(g, 3 * X)
    # per-example gradients: vmap of grad
    w = tensor(np.float32(2.0))
    per = jax.vmap(lambda xi: jax.grad(lambda w: h(xi * w))(w))(tensor())
    np.testing.assert_allclose(per, 3 * X * X * 2.0)
    for forward_mode in (
        lambda: jax.jvp(h, (tensor(),), (tensor(),)),
        lambda: jax.jacfwd(h)(tensor()),
        lambda: keras.ops.jvp(h, (tensor(),), (tensor(),)),
    ):
        with pytest.raises(TransformError, match="forward"):
            forward_mode()


@pytest.mark.backend("jax")
def test_jax_vmap_of_a_function_r_runs_is_refused():
    import jax

    h = sq(read_value=True)
    with pytest.raises(TransformError, match="jax.vmap"):
        jax.vmap(h)(tensor())


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
    with pytest.raises(TransformError, match="forward"):
        with tf.autodiff.ForwardAccumulator(x, x):
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


@pytest.mark.backend("torch")
def test_torch_func_transform_of_a_function_r_runs_is_refused():
    import torch

    h = sq(read_value=True)
    with pytest.raises(TransformError, match="torch.func"):
        torch.func.vmap(h)(tensor())


def test_per_example_gradients_of_op_grad_under_the_backends_map():
    # op_grad()'s route inside op_vectorized_map: a gradient per example.
    h = sq()
    w = tensor(np.float32(2.0))
    grad = _autodiff.value_and_grad(
        lambda w, xi: keras.ops.sum(h(xi * w)), positions=[1], wrt=[0]
    )
    if BACKEND == "tensorflow":
        # keras.ops.vectorized_map is pfor on TensorFlow: refused (as the
        # TransformError, wrapped by AutoGraph's StagingError).
        with pytest.raises(Exception, match="customgrad_error_transform: kind='pfor'"):
            keras.ops.vectorized_map(lambda xi: grad(None, w, xi)["grad"][0], tensor())
        return
    per = keras.ops.vectorized_map(lambda xi: grad(None, w, xi)["grad"][0], tensor())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(per), 3 * X * X * 2.0)
