# Conditions: customgrad's own errors, and R conditions that come back
# through Python.

abort_customgrad <- function(
  message,
  class,
  ...,
  call = rlang::caller_env(),
  parent = NULL,
  .envir = parent.frame()
) {
  cli::cli_abort(
    message,
    class = c(paste0("customgrad_error_", class), "customgrad_error"),
    ...,
    call = call,
    parent = parent,
    .envir = .envir
  )
}

# An R function for Python to call. An R error inside it reaches Python as
# an exception that carries the condition (reticulate attaches its class and
# fields), and comes back to R through with_python_errors(). Arguments reach
# it converted to R (Python lists as R lists, None as NULL); tensors stay
# Python objects, with conversion on as keras3 hands them out.
r_callback <- function(fn, convert = TRUE) {
  reticulate::r_to_py(fn, convert = convert)
}

# Evaluate a call into Python; errors that come back from customgrad's
# Python module become R errors again: the original R condition for one
# raised in an R callback, a classed customgrad error for the module's own
# checks. A calling handler (cheaper than tryCatch() on every call): it
# sees only errors that reach this frame, since an R error inside a Python
# callback is caught by reticulate's own handler, which is established
# later, in the callback; anything not from customgrad goes on as it is.
with_python_errors <- function(expr, call = rlang::caller_env()) {
  withCallingHandlers(expr, error = function(cnd) {
    if (inherits(cnd, "python.builtin.BaseException")) {
      rethrow_python_error(cnd, call)
    }
  })
}

rethrow_python_error <- function(cnd, call) {
  py <- customgrad_py()
  found <- py$find_error(cnd)
  if (is.null(found)) {
    return(invisible())
  }
  r_class <- reticulate::py_get_attr(found, "r_class")
  if (!inherits(r_class, "python.builtin.str")) {
    # An R condition, carried through Python by reticulate: signal it again.
    fields <- py$r_condition_fields(found)
    stop(structure(fields, class = reticulate::py_to_r(r_class)))
  }
  message <- reticulate::py_str(found)
  if (identical(reticulate::py_to_r(r_class), "customgrad_error_trace")) {
    abort_trace_strict(message, call = call, python_error = cnd)
  }
  # The Python error is kept as a field, not chained as the parent: its
  # message is this one again, which printed twice is noise.
  cli::cli_abort(
    "{message}",
    class = unique(c(reticulate::py_to_r(r_class), "customgrad_error")),
    call = call,
    python_error = cnd
  )
}

abort_trace_strict <- function(reason, call, ...) {
  abort_customgrad(
    c(
      "The custom-gradient function can't be traced, and tracing is strict.",
      "x" = "{reason}",
      "i" = "Compute with tensor operations only (no tensor values read in R, no R random numbers), or use {.code trace = TRUE} to let R run it at every call."
    ),
    class = "trace",
    call = call,
    ...
  )
}
