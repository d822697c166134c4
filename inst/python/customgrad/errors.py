"""Exceptions that the R side turns into classed R conditions.

Each class names the R condition class it becomes (``r_class``).  An R error
raised in an R callback reaches Python as an exception that reticulate made
from the condition (``r_class`` and the fields attached); the R side finds
either kind in an exception's cause/context chain with :func:`find_error`
and signals the R condition again.
"""


class CustomGradError(Exception):
    """Base class; becomes an R error of class ``customgrad_error``."""

    r_class = "customgrad_error"


class GradientCountError(CustomGradError):
    r_class = "customgrad_error_grad_count"


class GradientShapeError(CustomGradError):
    r_class = "customgrad_error_grad_shape"


class GradientStructureError(CustomGradError):
    r_class = "customgrad_error_grad_structure"


class VariablesError(CustomGradError):
    r_class = "customgrad_error_grad_variables"


class ThreadError(CustomGradError):
    r_class = "customgrad_error_thread"


class TraceError(CustomGradError):
    """A trace failed in strict mode (``op_custom_gradient(trace = "strict")``);
    the message is the reason, and R writes the rest."""

    r_class = "customgrad_error_trace"


class NotScalarError(CustomGradError):
    r_class = "customgrad_error_not_scalar"


class UpstreamError(CustomGradError):
    r_class = "customgrad_error_upstream"


class DtypeError(CustomGradError):
    r_class = "customgrad_error_wrt_dtype"


def carries_r_condition(exc):
    """Whether ``exc`` is an R condition that reticulate turned into a Python
    exception (it sets ``r_class`` and one attribute per field)."""
    return not isinstance(exc, CustomGradError) and hasattr(exc, "r_class")


def find_error(exc):
    """Return the first exception in ``exc``'s chain that the R side turns
    back into an R condition (a customgrad error, or an R condition that
    reticulate carried through Python), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CustomGradError) or carries_r_condition(exc):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def r_condition_fields(exc):
    """The fields of the R condition that ``exc`` carries, by name (Python's
    own attributes, such as the ``__notes__`` JAX adds, left out)."""
    return {
        k: v for k, v in vars(exc).items() if k != "r_class" and not k.startswith("__")
    }
