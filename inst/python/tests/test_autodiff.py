"""Gradients, gradient checks and compiled calls, driven by Python stand-ins
for the R callbacks."""

import keras
import numpy as np

from customgrad import _autodiff, _gradcheck, _memory
from customgrad._traced_function import TracedFunction


def parts(out):
    """The value and gradients of a value_and_grad reply."""
    return out["value"], out["grad"]


def tensor(x, dtype="float32"):
    return keras.ops.convert_to_tensor(np.asarray(x, dtype))


def values(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def sum_sin(x):
    return keras.ops.sum(keras.ops.sin(x))


def test_a_value_that_is_its_input_has_gradient_one():
    # The seed of a one-element value is the backend's own (no op of ours).
    grad = _autodiff.value_and_grad(lambda a: a, grads_only=True)(None, tensor([5.0]))
    np.testing.assert_allclose(values(grad), [1.0])


def test_unconnected_argument_gets_zeros():
    call = _autodiff.value_and_grad(lambda x, y: keras.ops.sum(x))
    _, (_, gy) = parts(call(None, tensor([1.0]), tensor([2.0, 3.0])))
    np.testing.assert_array_equal(values(gy), [0.0, 0.0])


def test_gradcheck_reports_progress_after_each_element():
    # R's progress bar (test-gradcheck.R) is set to these counts.
    done = []
    previous = _autodiff.enable_float64()
    try:
        _gradcheck.gradcheck(sum_sin, [tensor([0.5, 1.0])], 1e-6, progress=done.append)
    finally:
        _autodiff.restore_float64(previous)
    assert done == [1, 2]


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


def test_a_compiled_replay_the_compiler_refuses_runs_eagerly():
    # jax.jit refuses bincount() without a static length (its value's shape
    # depends on values): JAX's raw ConcretizationTypeError reached R.
    runs = []

    def f(x, tracing=False):
        runs.append(tracing)
        return keras.ops.bincount(keras.ops.cast(x, "int32"))

    compiled = _autodiff.compile_function(TracedFunction(f))
    np.testing.assert_allclose(
        values(compiled([tensor([0.0, 1.0, 0.0, 2.0])])), [2, 1, 1]
    )
    np.testing.assert_allclose(
        values(compiled([tensor([2.0, 2.0, 0.0, 3.0])])), [1, 0, 2, 1]
    )
    assert runs == [True]  # traced once; the replay ran, not f


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
