"""customgrad's exceptions: R classes carried through code that is not
customgrad's, and Keras' re-raise of an error with its own message."""

from customgrad import _bridge
from customgrad.errors import (
    CustomGradError,
    RConditionError,
    error_classes,
    find_error,
    note_r_condition,
    r_classes_by_python_class,
    r_condition_type,
)


class FromR(Exception):
    """What reticulate raises for an R error: it carries ``r_class``."""

    r_class = "an R capsule"


def test_an_r_condition_type_is_named_after_its_classes_and_made_once():
    cls = r_condition_type(("my_error", "other_error"))
    assert cls.__module__ == "customgrad.errors"
    assert cls.__name__ == "R:my_error,other_error"
    assert issubclass(cls, RConditionError)
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
        assert type(exc).__name__ == "R:my_error"
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


def test_r_condition_types_are_not_customgrad_error_classes():
    r_condition_type(("my_error",))
    assert all(c is not None for c in error_classes())
    assert not any(name.split(".")[-1].startswith("R:") for name in r_classes_by_python_class())
    assert "customgrad.errors.CustomGradError" in r_classes_by_python_class()
    assert issubclass(RConditionError, CustomGradError)
