from customgrad._structure import flatten, unflatten
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
    inner = GradientCountError("boom")
    try:
        try:
            raise inner
        except GradientCountError as exc:
            raise ValueError("wrapped") from exc
    except ValueError as outer:
        assert find_error(outer) is inner
    assert find_error(ValueError("plain")) is None
    assert GradientCountError.r_class == "customgrad_error_grad_count"
