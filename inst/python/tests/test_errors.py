"""customgrad's exceptions: R classes carried through code that is not
customgrad's, and Keras' re-raise of an error with its own message."""

import contextlib

import keras

import pytest

from customgrad import _bridge, errors
from customgrad.errors import (
    CustomGradError,
    FunctionNotFoundError,
    RConditionError,
    error_classes,
    find_error,
    note_r_condition,
    note_stop,
    r_condition_type,
)


def r_classes(cls):
    """The R classes reticulate gives an exception of ``cls`` beyond its
    Python ones: the bases whose module is empty."""
    return [b.__name__ for b in cls.__mro__ if b.__module__ == ""]


class FromR(Exception):
    """What reticulate raises for an R error: it carries ``r_class``."""

    r_class = "an R capsule"


def test_an_r_condition_type_carries_its_classes_and_is_made_once():
    cls = r_condition_type(("my_error", "other_error"))
    # Its own name is the first R class (reticulate: an empty module).
    assert cls.__name__ == "my_error" and cls.__module__ == ""
    assert r_classes(cls) == ["my_error", "other_error"]
    assert issubclass(cls, RConditionError)
    assert not issubclass(cls, CustomGradError)
    assert r_condition_type(("my_error", "other_error")) is cls
    # Keras re-raises an error as its class with its own message.
    assert str(cls("Keras' message")) == "Keras' message"


def test_call_r_raises_the_noted_classes_with_the_r_error_as_cause():
    def r_callback():
        note_r_condition("my_error")  # R's character vector of one
        raise FromR("boom")

    try:
        _bridge.call_r(r_callback)
    except RConditionError as exc:
        assert r_classes(type(exc)) == ["my_error"]
        assert isinstance(exc.__cause__, FromR)
        # customgrad's own calls still find the R condition itself.
        assert find_error(exc) is exc.__cause__
    else:
        raise AssertionError("no error")


def test_an_r_error_without_classes_of_its_own_passes_as_it_is():
    def r_callback():
        raise FromR("plain stop()")

    try:
        _bridge.call_r(r_callback)
    except FromR:
        pass


def interrupted():
    raise KeyboardInterrupt


def out_of_time():
    note_stop()
    raise FromR("reached elapsed time limit")


def failed():
    raise FromR("f fails on meta tensors")


@pytest.mark.parametrize(
    "r_callback, goes_on",
    [(interrupted, KeyboardInterrupt), (out_of_time, FromR), (failed, None)],
)
def test_an_r_error_caught_by_code_that_calls_r_again(r_callback, goes_on):
    # What Keras' PyTorch backend does with a failed symbolic call: catch
    # everything and call again; here, call R again. An interrupt or a time
    # limit goes on, and R is not called again; an ordinary error is left to
    # that code.
    calls = []
    with pytest.raises(goes_on) if goes_on else contextlib.nullcontext():
        try:
            _bridge.call_r(r_callback)
        except:  # noqa: E722 - as Keras does
            _bridge.call_r(lambda: calls.append(1))
    assert calls == ([] if goes_on else [1])


def test_customgrad_errors_carry_their_r_class_and_customgrad_error():
    r_condition_type(("my_error",))
    assert "my_error" not in error_classes()
    assert set(r_classes(FunctionNotFoundError)) == {
        "customgrad_error_load_function",
        "customgrad_error",
    }
    assert FunctionNotFoundError.r_class == "customgrad_error_load_function"
    assert CustomGradError.r_class == "customgrad_error"


def test_called_from_python_is_true_under_a_python_caller():
    from customgrad.errors import called_from_python

    # pytest's frames are below this call, as Python's are below R's
    # callback; a call R makes from its top level has none (test-backend-errors.R).
    assert called_from_python()


def test_keras_op_of_names_the_keras_op_whose_code_raised():
    x = keras.KerasTensor((), "float32")

    def step(carry, _):
        return carry, None  # Keras' symbolic scan can't take None ys

    with pytest.raises(Exception) as caught:
        keras.ops.scan(step, x, length=1)
    assert errors.keras_op_of(caught.value) == "scan"
    with pytest.raises(ValueError) as caught:
        raise ValueError("not in Keras")
    assert errors.keras_op_of(caught.value) is None
