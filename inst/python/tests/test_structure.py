import keras
import numpy as np

from customgrad._structure import any_symbolic, flatten, unflatten
from customgrad.errors import GradientCountError, find_error


def test_flatten_round_trip_keeps_nesting():
    tree = [1, [2, 3], {"a": 4, "b": [5]}]
    leaves, spec = flatten(tree)
    assert leaves == [1, 2, 3, 4, 5]
    assert spec.num_leaves() == 5
    assert unflatten(spec, leaves) == tree


def test_specs_compare_structure_not_leaves():
    _, a = flatten([1, [2, 3]])
    _, b = flatten(["x", ["y", "z"]])
    _, c = flatten([1, 2, 3])
    _, d = flatten({"a": 1})
    _, e = flatten({"b": 1})
    assert a.same_as(b)
    assert not a.same_as(c)
    assert not d.same_as(e)


def test_find_error_walks_the_chain():
    inner = GradientCountError(expected=1, tensors=1, returned=2)
    try:
        try:
            raise inner
        except GradientCountError as exc:
            raise ValueError("wrapped") from exc
    except ValueError as outer:
        assert find_error(outer) is inner
    assert find_error(ValueError("plain")) is None
    assert GradientCountError.r_class == "customgrad_error_grad_count"


def test_static_markers_are_kept_out_of_the_leaves_but_in_the_key():
    from customgrad._structure import Static

    a_leaves, a = flatten([1.0, Static("k1"), {"x": 2.0}])
    b_leaves, b = flatten([1.0, Static("k2"), {"x": 2.0}])
    assert a_leaves == [1.0, 2.0]
    assert a.num_leaves() == 2
    assert a.key != b.key
    rebuilt = unflatten(a, [3.0, 4.0])
    assert rebuilt[0] == 3.0 and rebuilt[2] == {"x": 4.0}
    assert isinstance(rebuilt[1], Static) and rebuilt[1].key == "k1"


def test_any_symbolic_finds_keras_symbolic_tensors_in_nests():
    symbolic = keras.KerasTensor((2,))
    assert any_symbolic((symbolic,))
    assert any_symbolic(([1.0, {"a": symbolic}],))
    assert not any_symbolic((np.ones(2), 1.0, keras.ops.ones(2), {"a": [2]}))
