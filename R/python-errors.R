# Errors that come back from Python: R conditions raised in R callbacks,
# and customgrad's Python exceptions, signalled as R's customgrad errors
# with the user's call (messages: python-error-messages.R).

# Evaluate a call into Python; errors that come back from customgrad's
# Python module become R errors again: the original R condition for one
# raised in an R callback, a classed customgrad error for the module's own
# checks. A calling handler (cheaper than tryCatch() on every call): it
# sees only errors that reach this frame, since an R error inside a Python
# callback is caught by reticulate's own handler, which is established
# later, in the callback; anything not from customgrad goes on as it is.
# `expr` is dropped on exit (rm() would cost 20 us a call): R keeps the
# frame of withCallingHandlers()'s caller reachable after the call, and
# with it the value of `expr` (the tensor R was handed), until the next
# call through here. A collection in that call (customgrad's run there)
# found it alive and promoted it, with the tensors its gradient saved, to
# stay until a level-1 or full one.
with_python_errors <- function(expr, call = rlang::caller_env()) {
  on.exit(expr <- NULL)
  withCallingHandlers(expr, error = function(cnd) {
    if (is_python_error(cnd)) {
      rethrow_python_error(cnd, call)
    }
  })
}

rethrow_python_error <- function(cnd, call) {
  if (!isTRUE(the$py_ready)) {
    return(invisible())
  }
  py <- the$py_module
  found <- py$find_error(cnd)
  if (is.null(found)) {
    return(invisible())
  }
  r_class <- reticulate::py_get_attr(found, "r_class")
  if (!inherits(r_class, "python.builtin.str")) {
    # An R condition, carried through Python by reticulate: signal it again.
    # customgrad's own checks in callbacks can't know the user's call; the
    # call that entered Python is it.
    cnd <- structure(
      py$r_condition_fields(found),
      class = reticulate::py_to_r(r_class)
    )
    if (inherits(cnd, "customgrad_error") && is.null(cnd$call)) {
      cnd$call <- if (is.environment(call)) rlang::frame_call(call) else call
    }
    stop(with_backend_classes(cnd))
  }
  class <- sub("^customgrad_error_", "", reticulate::py_to_r(r_class))
  details <- reticulate::py_to_r(reticulate::py_get_attr(found, "details"))
  if (is.null(details)) {
    # Only Keras' re-raised copy, with Keras' message: its R classes come
    # with its Python class (errors.r_class_base()).
    stop(cnd)
  }
  # The Python error is kept as a field, not chained as the parent: its
  # message says the same again, in Python's words.
  message <- if (reticulate::py_has_attr(found, "bullets")) {
    python_written_message(found)
  } else {
    python_error_message(class, details)
  }
  abort_customgrad(
    message,
    class = class,
    call = call,
    python_error = cnd,
    details = details,
    .envir = rlang::env(d = details)
  )
}

# A customgrad error raised in Python that reached R through code that is
# not customgrad's (keras3's save_model() and load_model(), a model's
# fit()) is the Python exception itself, to which reticulate gives
# customgrad's R classes (errors.r_class_base()). Its message is the one R
# writes for it, and its call is the keras3 or customgrad function the
# user called rather than reticulate's py_call_impl().
#' @export
conditionMessage.customgrad_error <- function(c) {
  cnd <- if (is_python_error(c)) condition_of_python_error(c)
  if (is.null(cnd)) NextMethod() else conditionMessage(cnd)
}

# rlang (and testthat's snapshots) read the message as a header (a method
# of rlang's generic, which lintr takes for a function name).
#' @exportS3Method rlang::cnd_header
cnd_header.customgrad_error <- function(cnd, ...) { # nolint: object_name.
  r_cnd <- if (is_python_error(cnd)) condition_of_python_error(cnd)
  if (is.null(r_cnd)) NextMethod() else conditionMessage(r_cnd)
}

#' @export
conditionCall.customgrad_error <- function(c) {
  if (!is_python_error(c)) {
    return(NextMethod())
  }
  user_call_in_trace(c)
}

# rlang (and testthat's snapshots) read the call as `cnd[["call"]]`, which
# for a Python exception is reticulate's: customgrad's exceptions (a class
# before reticulate's in theirs) give the user's call there too.
# nolint start: object_length_linter, object_name_linter.
#' @export
`[[.customgrad.errors.CustomGradError` <- function(x, i, ...) {
  if (identical(i, "call")) conditionCall.customgrad_error(x) else NextMethod()
}

#' @export
`$.customgrad.errors.CustomGradError` <- function(x, name) {
  x[[name]]
}
# nolint end

# Python's (an R condition given a backend's classes is R's).
is_python_error <- function(cnd) {
  inherits(cnd, "python.builtin.BaseException") &&
    reticulate::is_py_object(cnd)
}

# The R condition that customgrad's own calls signal for the Python
# exception `cnd` (see rethrow_python_error()), or NULL.
condition_of_python_error <- function(cnd) {
  found <- tryCatch(
    {
      rethrow_python_error(cnd, call = NULL)
      NULL
    },
    error = identity
  )
  if (is_python_error(found)) NULL else found
}

# The function the user called, from the R trace that reticulate keeps
# with a Python exception: the first call of a keras3 or customgrad
# function, or else the call that entered Python (`keras$ops$jvp(...)`, a
# Python function called from R, is what called reticulate's first frame).
user_call_in_trace <- function(cnd) {
  trace <- tryCatch(cnd$trace, error = function(e) NULL)
  if (!inherits(trace, "rlang_trace")) {
    return(NULL)
  }
  entry <- which(trace$namespace %in% c("keras3", "customgrad"))
  if (length(entry) > 0L) {
    return(trace$call[[entry[[1]]]])
  }
  into_python <- which(trace$namespace %in% "reticulate")
  caller <- if (length(into_python) > 0L) trace$parent[[into_python[[1]]]]
  if (is.null(caller) || caller == 0L) NULL else trace$call[[caller]]
}
