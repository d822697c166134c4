"""Exceptions that the R side turns into classed R conditions.

Each class names the R condition class it becomes (``r_class``); the R side
finds them in an exception's cause/context chain with :func:`find_error`.
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


class NotScalarError(CustomGradError):
    r_class = "customgrad_error_not_scalar"


class UpstreamError(CustomGradError):
    r_class = "customgrad_error_upstream"


class DtypeError(CustomGradError):
    r_class = "customgrad_error_wrt_dtype"


class DeferredOpError(CustomGradError):
    """A tensor op that R recorded inside ``f`` or ``grad`` failed."""

    r_class = "customgrad_error_op"


class RError(CustomGradError):
    """An R condition raised inside an R callback.

    The condition itself stays in R, stored under ``token``; Python carries
    only the token and the message, so that the R side can signal the
    original condition again, class and all.
    """

    r_class = None

    def __init__(self, token, message):
        super().__init__(message)
        self.token = token


def find_error(exc):
    """Return the first customgrad exception in ``exc``'s chain, or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CustomGradError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
