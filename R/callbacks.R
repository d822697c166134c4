# R functions for Python to call, and the R errors that leave them: told to
# Python so that their classes reach the R caller again.

# An R function for Python to call. An R error inside it reaches Python as
# an exception that carries the condition (reticulate attaches its class and
# fields), and comes back to R through with_python_errors(). Arguments reach
# it converted to R (Python lists as R lists, None as NULL); tensors stay
# Python objects, with conversion on as keras3 hands them out.
r_callback <- function(fn, convert = TRUE) {
  force(fn)
  reticulate::r_to_py(
    function(...) withCallingHandlers(fn(...), error = note_error),
    convert = convert
  )
}

# An error leaving an R callback, told to Python. One with classes of its
# own: its classes, so that they reach the R caller even through code that
# is not customgrad's (Keras' fit(), a layer's call; see errors.py,
# RConditionError). A time limit: that it must reach the user even through
# code that catches it and calls R again (R's limit fires only once).
note_error <- function(cnd) {
  if (is_time_limit(cnd)) {
    try(import_submodule("errors")$note_stop(), silent = TRUE)
    return()
  }
  classes <- setdiff(class(cnd), generic_condition_classes)
  if (length(classes) > 0L && !reticulate::is_py_object(cnd)) {
    # A customgrad_error_f's own error's classes (backend-errors.R), which
    # R adds where it reaches the user through customgrad's calls.
    extra <- setdiff(.subset2(cnd, "backend_classes"), classes)
    at <- match("customgrad_error", classes, nomatch = length(classes))
    classes <- append(classes, setdiff(extra, generic_condition_classes), at)
    try(import_submodule("errors")$note_r_condition(classes), silent = TRUE)
  }
}

# A customgrad error leaving an R function that Python called (customgrad's
# callbacks, and those keras3 hands to Python: op_map(), layer_lambda()),
# as a Python exception. reticulate's (a RuntimeError carrying the fields)
# reaches R again as python.builtin.RuntimeError wherever the caller is not
# customgrad; remade with the error's classes among its type's, it keeps
# them (errors.carried_r_condition()).
#' @rawNamespace S3method(reticulate::r_to_py, customgrad_error)
r_to_py.customgrad_error <- function(x, convert = FALSE) {
  carried <- NextMethod()
  if (!isTRUE(the$py_ready) || is_python_error(x)) {
    return(carried)
  }
  classes <- setdiff(class(x), generic_condition_classes)
  import_submodule("errors", convert = FALSE)$carried_r_condition(
    carried,
    classes
  )
}

generic_condition_classes <- c(
  "rlang_error",
  "simpleError",
  "error",
  "condition"
)
