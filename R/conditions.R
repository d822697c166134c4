# Conditions: customgrad's own errors, and carrying R conditions through
# Python. An R error inside a callback reaches Python only as a message
# (reticulate keeps no class), so the callback stores the condition here under
# a token, hands Python a `customgrad.RError(token, message)`, and the R
# caller signals the stored condition again when the exception comes back.

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

# Conditions waiting to be signalled again; bounded, because an exception
# that never comes back through customgrad (say `tape$gradient()` called by
# the user) leaves its entry behind.
stash_max <- 100L

stash_condition <- function(cnd) {
  the$error_count <- the$error_count + 1L
  token <- as.character(the$error_count)
  assign(token, cnd, envir = the$errors)
  stale <- the$error_count - stash_max
  if (stale > 0L) {
    suppressWarnings(rm(list = as.character(stale), envir = the$errors))
  }
  token
}

take_condition <- function(token) {
  cnd <- the$errors[[token]]
  if (!is.null(cnd)) {
    rm(list = token, envir = the$errors)
  }
  cnd
}

# Wrap an R function for Python to call: an R error becomes an RError object
# returned to Python, which raises it (see customgrad/_bridge.py).
# Arguments reach it converted to R (Python lists as R lists, None as NULL);
# tensors stay Python objects.
r_callback <- function(fn, convert = TRUE) {
  fn <- outside_session(fn)
  guarded <- function(...) {
    tryCatch(fn(...), error = function(cnd) {
      customgrad_py()$RError(stash_condition(cnd), conditionMessage(cnd))
    })
  }
  reticulate::r_to_py(guarded, convert = convert)
}

# Evaluate a call into Python; errors that come back from customgrad's
# Python module become R errors again: the original R condition for an
# RError, a classed customgrad error for the module's own checks.
with_python_errors <- function(expr, call = rlang::caller_env()) {
  tryCatch(expr, error = function(cnd) rethrow_python_error(cnd, call))
}

rethrow_python_error <- function(cnd, call) {
  exc <- python_exception(cnd)
  found <- if (!is.null(exc)) customgrad_py()$find_error(exc)
  if (
    is.null(found) ||
      reticulate::py_is_null_xptr(found) ||
      inherits(found, "python.builtin.NoneType")
  ) {
    recent <- the$last_signalled
    the$last_signalled <- NULL
    if (
      !is.null(recent) &&
        grepl(rlang::cnd_header(recent), conditionMessage(cnd), fixed = TRUE)
    ) {
      # A condition customgrad signalled again inside an R function that
      # Python called (as jax$grad(h) does) came back as a plain Python
      # error: it is the same one.
      signal_again(recent)
    }
    stop(cnd)
  }
  r_class <- reticulate::py_to_r(reticulate::py_get_attr(found, "r_class"))
  if (is.null(r_class)) {
    token <- reticulate::py_to_r(reticulate::py_get_attr(found, "token"))
    original <- take_condition(token)
    if (!is.null(original)) {
      signal_again(original)
    }
    stop(cnd)
  }
  message <- reticulate::py_str(found)
  # The Python error is kept as a field, not chained as the parent: its
  # message is this one again, which printed twice is noise.
  signal_again(rlang::catch_cnd(cli::cli_abort(
    "{message}",
    class = unique(c(r_class, "customgrad_error")),
    call = call,
    python_error = cnd
  )))
}

# The Python exception behind an R error raised by reticulate, or NULL.
python_exception <- function(cnd) {
  if (inherits(cnd, "python.builtin.BaseException")) {
    return(cnd)
  }
  last <- reticulate::py_last_error()
  if (is.null(last)) {
    return(NULL)
  }
  exc <- attr(last, "exception", exact = TRUE) %||% last[["exception"]]
  # py_last_error() outlives its error: make sure it is this one.
  msg <- conditionMessage(cnd)
  if (is.null(exc) || !grepl(last[["value"]] %||% "", msg, fixed = TRUE)) {
    return(NULL)
  }
  exc
}

# Signal a condition that came back through Python, remembering it for one
# more trip (see above).
signal_again <- function(cnd) {
  the$last_signalled <- cnd
  stop(cnd)
}
