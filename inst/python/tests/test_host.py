"""R host ops (``_host``): Python stand-ins for R that read their inputs'
values, inside the backends' compiled computations, and the main thread
serving callbacks made on other threads."""

import threading

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _autodiff, _backend, _host, errors
from customgrad._traced_function import TracedFunction
from customgrad.errors import HostValueError, ThreadError, find_error
from test_adapters import reply

X = np.array([0.5, 1.0, 2.0], "float32")


def like_input(x):
    return x


def cube():
    """x^3 with the rule 3 x^2, read as NumPy values (as R reads them)."""

    def forward(x, tracing=False, **options):
        xv = keras.ops.convert_to_numpy(x)  # fails on symbolic tensors

        def grad(upstream, variables):
            return [upstream * keras.ops.convert_to_tensor(3 * xv**2)]

        return reply(keras.ops.convert_to_tensor(xv**3), grad)

    return customgrad.custom_gradient(forward, trace=False, value_like=like_input)


@pytest.mark.backend("jax")
def test_a_forward_alone_keeps_no_gradient_function(monkeypatch):
    import jax

    nodes = []

    class Recorded(_host._Node):
        __slots__ = ()

        def __init__(self):
            super().__init__()
            nodes.append(self)

    monkeypatch.setattr(_host, "_Node", Recorded)
    h = cube()
    value = jax.jit(h)
    for _ in range(3):
        np.testing.assert_allclose(value(X), X**3, rtol=1e-6)
    step = jax.jit(jax.grad(lambda x: jax.numpy.sum(h(x))))
    for _ in range(3):
        np.testing.assert_allclose(step(X), 3 * X**2, rtol=1e-6)
    assert len(nodes) >= 2
    # Each backward took its forward's grad; a forward alone kept none.
    assert all(not n.pending for n in nodes)
    assert any(n.keeps for n in nodes) and not all(n.keeps for n in nodes)


@pytest.mark.backend("jax")
def test_a_dropped_gradient_function_is_an_error(monkeypatch):
    import jax

    monkeypatch.setattr(_host, "MAX_PENDING", 1)
    h = cube()
    # Two forwards before their backward passes: the first's grad is
    # dropped, and its backward is refused, never computed from another's.
    _, pullback_1 = jax.vjp(jax.jit(h), X)
    _, pullback_2 = jax.vjp(jax.jit(h), 2 * X)
    np.testing.assert_allclose(
        pullback_2(np.ones(3, "float32"))[0], 12 * X**2, rtol=1e-6
    )
    with pytest.raises(Exception) as info:
        pullback_1(np.ones(3, "float32"))
    assert isinstance(find_error(info.value), HostValueError)


@pytest.mark.backend("torch")
def test_torch_takes_a_value_of_another_shape_than_value_like_as_it_is():
    # Eager: R's value is the value (elsewhere refused: test-host-*.R).
    def forward(x, tracing=False, **options):
        xv = keras.ops.convert_to_numpy(x)
        return reply(keras.ops.convert_to_tensor(xv.sum()), lambda u, v: [u])

    h = customgrad.custom_gradient(forward, trace=False, value_like=like_input)
    run = _autodiff.compile_function(TracedFunction(lambda x: h(x), trace=False))
    np.testing.assert_allclose(run([keras.ops.convert_to_tensor(X)]), X.sum())


def test_a_callback_on_another_thread_with_no_one_serving_is_refused_at_once():
    out = []

    def work():
        try:
            _host._on_main(lambda: None)
        except Exception as exc:  # noqa: BLE001 - examined below
            out.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(errors.recover_host_failure(out[0]), ThreadError)


def test_an_interrupt_in_a_compiled_host_op_is_an_interrupt():
    def forward(x, tracing=False, **options):
        keras.ops.convert_to_numpy(x)  # fails on symbolic tensors
        raise KeyboardInterrupt  # as R's Esc / Ctrl+C reaches Python

    h = customgrad.custom_gradient(forward, trace=False, value_like=like_input)
    compiled = _backend.adapter().compile(lambda x: keras.ops.sum(h(x)))
    with pytest.raises(KeyboardInterrupt):
        compiled(X)


def test_an_interrupt_in_the_backends_own_callback_code_is_an_interrupt():
    # JAX's text when the interrupt lands after customgrad's callback
    # returned, as it turns the result into an array (seen in make soak).
    reported = RuntimeError(
        "INTERNAL: CpuCallback error calling callback: Traceback (most recent"
        ' call last):\n  File "jax/_src/callback.py", line 89, in'
        " pure_callback_impl\n  File \"jax/_src/api.py\", line 2658, in"
        " device_put\nKeyboardInterrupt: "
    )
    with pytest.raises(KeyboardInterrupt):
        errors.raise_host_stop(reported)
    # Other failures go on as they were.
    errors.raise_host_stop(RuntimeError("Traceback (most recent call last):\nKeyError: 1"))
    errors.raise_host_stop(RuntimeError("KeyboardInterrupt in a message only"))


def test_a_marked_failure_is_recovered_from_the_backends_text():
    failure = errors.mark_host_failure(KeyError("lost"))
    wrapped = RuntimeError(f"the backend says: {failure} (node PyFunc)")
    assert isinstance(errors.recover_host_failure(wrapped), KeyError)
    assert errors.recover_host_failure(RuntimeError("nothing of ours")) is None
