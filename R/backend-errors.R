# A backend's errors raised while R's f or grad run: customgrad_error_f or
# customgrad_error_grad, with the backend's error as the parent and its
# Python classes kept.

# `fn(args)`, with a backend's error raised while `f` or `grad` ran (a
# Python exception from an op_*() call) as customgrad_error_f or
# customgrad_error_grad: what ran, with which arguments (`described`), and
# the backend's error as the parent, shown with the call in `fn` that raised
# it rather than reticulate's py_call_impl(). Its Python classes travel as
# a field: a condition with them crosses Python as the Python exception it
# names (reticulate), so they are added to the class only in R, where the
# error reaches the user (with_backend_classes()).
# `host`: R runs in a host callback (_host.py), where every error of `fn`'s
# own stops the computation as one of these, with its R classes kept.
call_with_backend_errors <- function(
  fn,
  args,
  what,
  described = args,
  host = FALSE
) {
  withCallingHandlers(do.call(fn, args), error = function(cnd) {
    if (host && !inherits(cnd, "customgrad_error") && !is_time_limit(cnd)) {
      abort_backend_error(cnd, what, described, host = TRUE)
    }
    if (
      inherits(cnd, "python.builtin.Exception") &&
        !inherits(cnd, "customgrad_error") &&
        is.null(the$py_module$find_error(cnd))
    ) {
      abort_backend_error(
        with_condition_call(cnd, call_made_in(fn)),
        what,
        described
      )
    }
  })
}

abort_backend_error <- function(cnd, what, args, host = FALSE) {
  labels <- names(args) %||% character(length(args))
  labels[!nzchar(labels)] <- paste0("..", which(!nzchar(labels)))
  described <- vapply(args, describe_object, "")
  arguments <- paste0("`", labels, "` = ", described)
  names(arguments) <- rep("*", length(arguments))
  abort_customgrad(
    c(
      if (host && what == "f") {
        "{.arg f} of a custom-gradient function failed in a host callback, inside a compiled computation."
      } else if (host) {
        "The gradient function of a custom-gradient function failed in a host callback, inside a compiled computation."
      } else if (what == "f") {
        "The backend failed in {.arg f} of a custom-gradient function."
      } else {
        "The backend failed in the gradient function of a custom-gradient function."
      },
      "i" = if (length(args) == 0) {
        "{.arg f} was called with no arguments."
      } else {
        "{.arg f} was called with:"
      },
      arguments
    ),
    class = what,
    call = NULL,
    parent = cnd,
    backend_classes = setdiff(
      class(cnd),
      c("python.builtin.object", "rlang_error", "error", "condition")
    )
  )
}

# The call in `fn`'s own code that is running now (during an error in it,
# the one that failed): the innermost call made from `fn`'s frame, such as
# `op_multiply(x, 10)`, `keras$ops$multiply(x, 10)` or `my_helper(x)`, and
# for an S3 method the generic's call (`x * "a"`), as rlang names it.
call_made_in <- function(fn) {
  frames <- seq_len(sys.nframe())
  own <- Filter(function(i) identical(sys.function(i), fn), frames)
  if (length(own) == 0L) {
    return(NULL)
  }
  from_fn <- which(sys.parents() == own[[length(own)]])
  if (length(from_fn) == 0L) {
    return(NULL)
  }
  rlang::error_call(sys.frame(from_fn[[length(from_fn)]]))
}

# A condition with another call (a Python exception's: reticulate's is the
# py_call_impl() that raised it). It is a list underneath; `$<-` would set
# a Python attribute instead.
with_condition_call <- function(cnd, call) {
  if (is.null(call) || typeof(cnd) != "list") {
    return(cnd)
  }
  classes <- oldClass(cnd)
  cnd <- unclass(cnd)
  cnd$call <- call
  class(cnd) <- classes
  cnd
}

# The backend's classes among those of a customgrad_error_f or _grad that
# reached the user (not inside a callback from Python: see
# call_with_backend_errors()), so that tryCatch() on them still works.
with_backend_classes <- function(cnd) {
  extra <- .subset2(cnd, "backend_classes")
  if (length(extra) == 0L || inside_python_callback()) {
    return(cnd)
  }
  cls <- class(cnd)
  at <- match("customgrad_error", cls)
  class(cnd) <- c(cls[seq_len(at)], extra, cls[-seq_len(at)])
  cnd
}

# Whether R runs inside a call from Python, asked of Python (see
# errors.called_from_python()).
inside_python_callback <- function() {
  isTRUE(the$py_ready) && import_submodule("errors")$called_from_python()
}
