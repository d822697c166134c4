"""The backend adapters, driven by Python stand-ins for the R callbacks.

Like R's forward callback, a stand-in takes the keyword hint
``released=``, which it may ignore.
"""

import keras
import numpy as np
import pytest

import customgrad
from customgrad._messages import ForwardReply

BACKEND = keras.config.backend()


def grad_of(fn, *xs):
    """Gradients of sum(fn(*xs)) with the backend's own autodiff."""
    xs = [keras.ops.convert_to_tensor(np.asarray(x, "float32")) for x in xs]
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = keras.ops.sum(fn(*xs))
        grads = tape.gradient(y, xs)
        return [
            np.zeros(x.shape) if g is None else np.asarray(g) for g, x in zip(grads, xs)
        ]
    if BACKEND == "jax":
        import jax

        grads = jax.grad(
            lambda *a: keras.ops.sum(fn(*a)), argnums=tuple(range(len(xs)))
        )(*xs)
        return [np.asarray(g) for g in grads]

    xs = [x.detach().requires_grad_(True) for x in xs]
    keras.ops.sum(fn(*xs)).backward()
    return [np.zeros(tuple(x.shape)) if x.grad is None else x.grad.numpy() for x in xs]


def reply(value, grad):
    """What R's forward_reply() gives Python: a dict with named fields."""
    return dict(ForwardReply(value, grad)._asdict())


def log1pexp_forward(x, **hints):
    e = keras.ops.exp(x)

    def grad(upstream, variables):
        return [upstream * (1.0 - 1.0 / (1.0 + e))]

    return reply(keras.ops.log(1.0 + e), grad)


@pytest.mark.backend("torch")
def test_torch_makes_no_upstream_for_what_the_rule_keeps(monkeypatch):
    from customgrad import _torch

    seen = []
    backward = _torch._EagerFunction.backward

    def spy(ctx, *upstream):
        seen.append(upstream)
        return backward(ctx, *upstream)

    monkeypatch.setattr(_torch._EagerFunction, "backward", staticmethod(spy))

    def forward(x, **hints):
        e = keras.ops.exp(x)  # kept for the rule

        def grad(upstream, variables):
            du, dv = upstream
            return [du * e + dv * 2.0]

        return reply([e, x * 2.0], grad)

    h = customgrad.custom_gradient(forward)
    # The second output unused: its upstream is zeros for the rule.
    (g,) = grad_of(lambda x: h(x)[0], [0.0, 1.0])
    np.testing.assert_allclose(g, np.exp([0.0, 1.0]), rtol=1e-6)
    ((used, unused, *kept),) = seen
    assert used is not None and unused is None
    assert kept and all(u is None for u in kept)


def test_from_r_returns_an_error_for_r_to_raise_and_counts_results():
    from customgrad import _memory
    from customgrad.errors import Raised

    def forward(x, **hints):
        if keras.ops.shape(x)[0] == 3:
            raise ValueError("three")
        return reply(x * 2.0, lambda upstream, variables: [upstream * 2.0])

    h = customgrad.custom_gradient(forward, trace=False)
    x = keras.ops.ones((2,))
    before = _memory.stats()["bytes"]
    np.testing.assert_allclose(np.asarray(h.from_r(x)), [2.0, 2.0])
    assert _memory.stats()["bytes"] == before + 8  # two float32 held by R
    failed = h.from_r(keras.ops.ones((3,)))
    assert isinstance(failed, Raised)
    with pytest.raises(ValueError, match="three"):
        failed.again()


def test_flat_inputs_takes_tensors_as_they_are_and_variables_by_value():
    from customgrad import _bridge, _structure

    x = keras.ops.ones((2,))
    v = keras.Variable([1.0, 2.0])
    tensors, spec = _bridge.flat_inputs((x, x))
    assert tensors[0] is x and tensors[1] is x
    assert spec.key == _structure.flatten([x, x])[1].key
    # A Keras variable is a tensor to TensorFlow: it still gives its value.
    tensors, mixed = _bridge.flat_inputs((x, v))
    assert tensors[1] is v.value
    assert mixed.key == spec.key
    tensors, nested = _bridge.flat_inputs(([x, x],))
    assert nested.key != spec.key


def test_nested_inputs_and_none_gradients():
    def forward(xs, w, **hints):
        def grad(upstream, variables):
            return [[upstream * w, None], None]

        return reply(keras.ops.sum(xs[0] * w) + keras.ops.sum(xs[1]), grad)

    h = customgrad.custom_gradient(forward)
    gx = grad_of(lambda a, b, w: h([a, b], w), [1.0, 2.0], [3.0], [5.0, 7.0])
    np.testing.assert_allclose(gx[0], [5.0, 7.0])
    np.testing.assert_allclose(gx[1], [0.0])
    np.testing.assert_allclose(gx[2], [0.0, 0.0])


def test_an_r_condition_from_a_callback_is_found_with_its_fields():
    def forward(x, **hints):
        # What reticulate raises for an R error in a callback.
        exc = RuntimeError("f failed")
        exc.r_class = ["my_error", "error", "condition"]
        exc.message = "f failed"
        raise exc

    h = customgrad.custom_gradient(forward)
    with pytest.raises(Exception) as info:
        h(keras.ops.ones((1,)))
    err = customgrad.find_error(info.value)
    assert err.r_class == ["my_error", "error", "condition"]
    assert customgrad.r_condition_fields(err) == {"message": "f failed"}


def test_a_gradient_for_a_static_argument_is_an_error():
    from customgrad._structure import Static

    def forward(x, option, **hints):
        return reply(x * 3.0, lambda upstream, variables: [upstream * 3.0, upstream])

    h = customgrad.custom_gradient(forward)
    with pytest.raises(Exception) as info:
        grad_of(lambda x: h(x, Static("opt")), [1.0])
    found = customgrad.find_error(info.value)
    assert found.details == {"input": 2, "problem": "static"}
