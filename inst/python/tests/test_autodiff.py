"""Gradients, gradient checks and compiled calls, driven by Python stand-ins
for the R callbacks."""

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _autodiff, _gradcheck, _memory
from customgrad._traced_function import TracedFunction
from test_adapters import reply

BACKEND = keras.config.backend()


def parts(out):
    """The value and gradients of a value_and_grad reply."""
    return out["value"], out["grad"]


def tensor(x, dtype="float32"):
    return keras.ops.convert_to_tensor(np.asarray(x, dtype))


def values(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def sum_sin(x):
    return keras.ops.sum(keras.ops.sin(x))


def test_gradient_of_sin_is_cos():
    call = _autodiff.value_and_grad(sum_sin)
    x = tensor([0.0, 1.0, 2.0])
    value, (grad,) = parts(call(None, x))
    np.testing.assert_allclose(values(value), np.sum(np.sin([0, 1, 2])), rtol=1e-6)
    np.testing.assert_allclose(values(grad), np.cos([0, 1, 2]), rtol=1e-6)


def test_gradients_mirror_nested_arguments():
    def f(x, p):
        return keras.ops.sum(p["w"] * x * x) + p["b"][0] * p["b"][1]

    call = _autodiff.value_and_grad(f)
    x = tensor([1.0, 2.0])
    p = {"w": tensor([3.0, 4.0]), "b": [tensor(5.0), tensor(6.0)]}
    _, (gx, gp) = parts(call(None, x, p))
    assert list(gp) == ["w", "b"]
    np.testing.assert_allclose(values(gx), [6.0, 16.0])
    np.testing.assert_allclose(values(gp["w"]), [1.0, 4.0])
    np.testing.assert_allclose([values(g) for g in gp["b"]], [6.0, 5.0])


def test_grads_only_replies_the_gradient_alone_or_a_list_of_them():
    x = tensor([0.0, 1.0])
    grad = _autodiff.value_and_grad(sum_sin, grads_only=True)(None, x)
    np.testing.assert_allclose(values(grad), np.cos([0, 1]), rtol=1e-6)

    def f(x, p):
        return keras.ops.sum(x * p["w"])

    p = {"w": tensor([3.0, 4.0])}
    gx, gp = _autodiff.value_and_grad(f, grads_only=True)(None, x, p)
    np.testing.assert_allclose(values(gx), [3.0, 4.0])
    np.testing.assert_allclose(values(gp["w"]), [0.0, 1.0])
    # One argument differentiated, a nest of tensors: the nest.
    call = _autodiff.value_and_grad(f, wrt=[1], grads_only=True)
    np.testing.assert_allclose(values(call(None, x, p)["w"]), [0.0, 1.0])


def test_one_tensor_passed_twice_gets_a_gradient_per_argument():
    x = tensor([2.0, 3.0])
    # d/da sum(a^2 * b) = 2ab, d/db = a^2: at a = b = x, distinct results.
    ga, gb = _autodiff.value_and_grad(
        lambda a, b: keras.ops.sum(a * a * b), grads_only=True
    )(None, x, x)
    np.testing.assert_allclose(values(ga), [8.0, 18.0])
    np.testing.assert_allclose(values(gb), [4.0, 9.0])
    # Differentiated once, passed again as an argument not differentiated.
    ga = _autodiff.value_and_grad(
        lambda a, b: keras.ops.sum(a * a * b), wrt=[0], grads_only=True
    )(None, x, x)
    np.testing.assert_allclose(values(ga), [8.0, 18.0])


def test_a_value_that_is_its_input_has_gradient_one():
    # The seed of a one-element value is the backend's own (no op of ours).
    grad = _autodiff.value_and_grad(lambda a: a, grads_only=True)(None, tensor([5.0]))
    np.testing.assert_allclose(values(grad), [1.0])


def test_upstream_gives_a_vector_jacobian_product():
    call = _autodiff.value_and_grad(keras.ops.exp)
    x = tensor([0.0, 1.0])
    value, (grad,) = parts(call(tensor([1.0, 10.0]), x))
    np.testing.assert_allclose(values(value), np.exp([0, 1]), rtol=1e-6)
    np.testing.assert_allclose(values(grad), [1.0, 10 * np.e], rtol=1e-6)


def test_unconnected_argument_gets_zeros():
    call = _autodiff.value_and_grad(lambda x, y: keras.ops.sum(x))
    _, (_, gy) = parts(call(None, tensor([1.0]), tensor([2.0, 3.0])))
    np.testing.assert_array_equal(values(gy), [0.0, 0.0])


def test_errors_are_classed():
    call = _autodiff.value_and_grad(keras.ops.exp)
    with pytest.raises(_autodiff.NotScalarError):
        call(None, tensor([1.0, 2.0]))
    with pytest.raises(_autodiff.UpstreamError) as info:
        call(tensor([1.0, 2.0, 3.0]), tensor([1.0, 2.0]))
    assert info.value.details["upstream_shape"] == "(3)"
    assert info.value.details["value_shape"] == "(2)"
    with pytest.raises(_autodiff.UpstreamError) as info:
        call([tensor([1.0]), tensor([1.0])], tensor([1.0]))
    assert info.value.details["problem"] == "nesting"
    with pytest.raises(_autodiff.DtypeError, match="argument=3") as info:
        _autodiff.value_and_grad(sum_sin, positions=[3])(None, tensor([1], "int32"))
    assert info.value.details == {"argument": 3, "dtype": "int32"}


def test_second_derivative_of_sin_is_minus_sin():
    inner = _autodiff.value_and_grad(keras.ops.sin)

    def dsin(x):
        return inner(None, x)["grad"][0]

    outer = _autodiff.value_and_grad(dsin)
    _, (g2,) = parts(outer(None, tensor(1.0)))
    np.testing.assert_allclose(values(g2), -np.sin(1.0), rtol=1e-6)


@pytest.mark.backend("torch")
def test_torch_leaves_the_callers_tensors_alone():
    import torch

    call = _autodiff.value_and_grad(sum_sin)
    x = torch.tensor([1.0, 2.0])
    _, (g,) = parts(call(None, x))
    assert not x.requires_grad and x.grad is None
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    _, (g,) = parts(call(None, y))
    assert y.grad is None
    # grad mode on and y carries history: the gradient is differentiable.
    keras.ops.sum(g).backward()
    np.testing.assert_allclose(y.grad.numpy(), -np.sin([1.0, 2.0]), rtol=1e-6)
    with torch.no_grad():
        _, (g,) = parts(call(None, y))
    assert not g.requires_grad


@pytest.mark.backend("jax")
def test_jax_gradient_works_under_jit_and_grad():
    import jax

    call = _autodiff.value_and_grad(sum_sin)
    jitted = jax.jit(lambda x: call(None, x)["grad"][0])
    np.testing.assert_allclose(values(jitted(tensor([1.0]))), np.cos([1.0]), rtol=1e-6)
    outer = jax.grad(lambda x: keras.ops.sum(call(None, x)["grad"][0]))
    np.testing.assert_allclose(values(outer(tensor([1.0]))), -np.sin([1.0]), rtol=1e-6)


@pytest.mark.backend("tensorflow")
def test_tensorflow_gradient_works_in_tf_function():
    import tensorflow as tf

    call = _autodiff.value_and_grad(sum_sin)
    traced = tf.function(lambda x: call(None, x)["grad"][0])
    np.testing.assert_allclose(values(traced(tensor([1.0]))), np.cos([1.0]), rtol=1e-6)


def wrong_sin_forward(x, **hints):
    def grad(upstream, variables):
        return [upstream * keras.ops.sin(x)]  # should be cos(x)

    return reply(keras.ops.sin(x), grad)


def right_sin_forward(x, **hints):
    def grad(upstream, variables):
        return [upstream * keras.ops.cos(x)]

    return reply(keras.ops.sin(x), grad)


def test_gradcheck_passes_a_right_custom_gradient():
    h = customgrad.custom_gradient(right_sin_forward)
    previous = _autodiff.enable_float64()
    try:
        x = tensor([[0.5, 1.0], [1.5, 2.0]])
        analytic, numeric, shapes = _gradcheck.gradcheck(h, [x], 1e-6).values()
    finally:
        _autodiff.restore_float64(previous)
    assert shapes == [[2, 2]]
    np.testing.assert_allclose(analytic[0], numeric[0], atol=1e-6)


def test_gradcheck_catches_a_wrong_custom_gradient():
    h = customgrad.custom_gradient(wrong_sin_forward)
    done = []

    def f(x):
        return keras.ops.sum(h(x))

    previous = _autodiff.enable_float64()
    try:
        analytic, numeric, _ = _gradcheck.gradcheck(
            f, [tensor([0.5, 1.0])], 1e-6, progress=done.append
        ).values()
    finally:
        _autodiff.restore_float64(previous)
    np.testing.assert_allclose(analytic[0], np.sin([0.5, 1.0]), rtol=1e-9)
    np.testing.assert_allclose(numeric[0], np.cos([0.5, 1.0]), rtol=1e-6)
    assert done == [1, 2]


def test_gradcheck_checks_nested_inputs_in_float64():
    def f(p):
        return p["a"] * keras.ops.exp(p["b"])

    previous = _autodiff.enable_float64()
    try:
        args = [{"a": tensor([2.0]), "b": tensor(0.5)}]
        analytic, numeric, shapes = _gradcheck.gradcheck(f, args, 1e-6).values()
    finally:
        _autodiff.restore_float64(previous)
    assert shapes == [[1], []]
    for a, n in zip(analytic, numeric):
        np.testing.assert_allclose(a, n, rtol=1e-6)


@pytest.mark.backend("jax")
def test_float64_mode_is_restored_on_jax():
    import jax

    assert not jax.config.jax_enable_x64
    previous = _autodiff.enable_float64()
    assert jax.config.jax_enable_x64
    _autodiff.restore_float64(previous)
    assert not jax.config.jax_enable_x64


def test_compiled_function_runs_f_once_and_keeps_names_in_order():
    calls = []

    def f(x, p, tracing=False):
        calls.append(tracing)
        return {"z": keras.ops.sin(x) * p["b"], "a": p["a"]}

    compiled = _autodiff.compile_function(TracedFunction(f))
    for i in range(3):
        out = compiled([tensor([float(i)]), {"b": tensor(2.0), "a": tensor(1.0)}])
        assert list(out) == ["z", "a"]
        np.testing.assert_allclose(values(out["z"]), 2 * np.sin([float(i)]), rtol=1e-6)
    # Traced once on Keras symbolic tensors; TensorFlow's and JAX's
    # compilers then see the replay, on their own symbolic tensors.
    assert calls == [True]


def test_compiled_function_reads_and_assigns_variables_at_every_call():
    # jax.jit fixes a variable read inside its trace as a constant: the
    # compiled function must read it at each call, and apply what f
    # assigns (a seed generator's state, a counter).
    scale = keras.Variable(2.0)
    count = keras.Variable(0.0)

    def f(x, tracing=False):
        count.assign(count + 1.0)
        return keras.ops.sum(x * scale)

    compiled = _autodiff.compile_function(TracedFunction(f, trace=False))
    x = tensor([1.0, 2.0])
    np.testing.assert_allclose(values(compiled([x])), 6.0)
    scale.assign(5.0)
    np.testing.assert_allclose(values(compiled([x])), 15.0)
    np.testing.assert_allclose(values(compiled([x])), 15.0)
    assert float(values(count)) == 3.0
    scale.assign(1.0)
    np.testing.assert_allclose(values(compiled([x])), 3.0)


def test_a_call_from_r_whose_result_makes_a_collection_due_tells_r_at_once(
    monkeypatch,
):
    # Bytes handed to R alone (no memory count), so that the tiny
    # threshold is passed by the results and nothing else.
    monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: None)
    calls, told = [], []
    _memory.set_collector(lambda: calls.append(1), 1000, lambda: told.append(1))
    try:
        grad = _autodiff.value_and_grad(sum_sin, grads_only=True)
        grad(None, tensor(np.zeros(100)))  # 404 bytes back: not due
        assert told == []
        grad(None, tensor(np.zeros(200)))  # 804 more: due
        # R is told before the call returns, so that it collects before
        # its next call rather than one call later.
        assert (calls, told) == ([], [1])
        _memory.collect_deferred()
        compiled = _autodiff.compile_function(
            TracedFunction(lambda x, tracing=False: x * 2)
        )
        compiled([tensor(np.zeros(300))])  # 1,200 bytes back: due
        assert (calls, told) == ([1], [1, 1])
    finally:
        _memory.set_collector(None, 64 * 2**20)
