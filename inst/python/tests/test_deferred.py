"""Running the tapes of ops that R records inside f and grad."""

import keras
import numpy as np
import pytest

from customgrad import _deferred
from customgrad.errors import DeferredOpError


def t(values, dtype="float32"):
    return keras.ops.convert_to_tensor(np.asarray(values, dtype))


def test_a_tape_runs_in_order_with_references_by_id():
    x = t([0.0, 1.0])
    tape = [
        [2.0, "exp", [1.0], None, 0],  # exp(x), x known as id 1
        [3.0, "add", [1, 2.0], None, 1],  # 1 + e
        [4.0, "multiply", [3.0, 2.0], None, [0, 1]],  # (1 + e) * e
    ]
    values = _deferred.run(tape, {1.0: x})
    e = np.exp([0.0, 1.0])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(values[4.0]), (1 + e) * e, rtol=1e-6)


def test_a_tape_can_run_twice():
    tape = [[2.0, "multiply", [1.0, 3.0], None, 0]]
    first = _deferred.run(tape, {1.0: t([1.0])})
    second = _deferred.run(tape, {1.0: t([2.0])})
    assert float(keras.ops.convert_to_numpy(first[2.0])[0]) == 3.0
    assert float(keras.ops.convert_to_numpy(second[2.0])[0]) == 6.0


def test_grad_tapes_read_the_forward_values():
    forward = {5.0: t([2.0])}
    tape = [[7.0, "multiply", [6.0, 5.0], None, [0, 1]]]
    values = _deferred.run(tape, {6.0: t([3.0])}, parent=forward)
    assert float(keras.ops.convert_to_numpy(values[7.0])[0]) == 6.0


def test_keyword_arguments_reach_the_op():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    tape = [[2.0, "sum", [1.0], {"axis": 0, "keepdims": True}, 0]]
    values = _deferred.run(tape, {1.0: x})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(values[2.0]), [[4.0, 6.0]])


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_arithmetic_with_a_number_matches_keras_ops(name, dtype):
    x = t([0.5, 2.0, -3.0], dtype)
    for args in ([x, 2], [3.5, x]):
        fast = _deferred._call(name, list(args), None)
        slow = getattr(keras.ops, name)(*args)
        assert keras.backend.standardize_dtype(fast.dtype) == keras.backend.standardize_dtype(slow.dtype)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(fast), keras.ops.convert_to_numpy(slow), rtol=1e-3
        )


def test_integer_tensors_go_through_keras_ops():
    x = t([1, 2], "int32")
    out = _deferred._call("divide", [x, 2], None)
    assert keras.backend.standardize_dtype(out.dtype) == keras.backend.standardize_dtype(
        keras.ops.divide(x, 2).dtype
    )


def test_a_failing_op_names_itself_and_the_option():
    tape = [[2.0, "matmul", [1.0, t(np.ones((3, 3)))], None, 0]]
    with pytest.raises(DeferredOpError) as info:
        _deferred.run(tape, {1.0: t(np.ones((2, 2)))})
    assert "op_matmul()" in str(info.value)
    assert "customgrad.defer_ops" in str(info.value)


def test_markers_in_results_become_values():
    a, b = t([1.0]), t([2.0])
    out = _deferred.decode([{".customgrad_node": 1.0}, [None, {".customgrad_node": 2.0}]], {1.0: a}, {2.0: b})
    assert out[0] is a and out[1][0] is None and out[1][1] is b


def test_needed_lists_the_forward_values_a_recorded_grad_uses():
    tape = [
        [10.0, "add", [1, 3.0], None, 1],  # 1 + e (e = 3, from forward)
        [11.0, "multiply", [9.0, 10.0], None, [0, 1]],  # upstream (9) * ...
    ]
    grads = [{".customgrad_node": 11.0}, {".customgrad_node": 4.0}]
    assert _deferred.needed([grads, tape, 9.0]) == {3.0, 4.0}


def test_ops_called_one_at_a_time_get_the_same_shortcut():
    x = t([1.0, 2.0])
    assert _deferred.op("exp") is keras.ops.exp
    add = _deferred.op("add")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(add(x, 2)), [3.0, 4.0])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(add(x, x)), [2.0, 4.0])
