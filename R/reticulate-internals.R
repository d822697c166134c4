# The one internal of reticulate that customgrad reads (here, and in
# Python in _bridge.f_result_parts()), for want of a public API: the R
# function inside reticulate's Python wrapper of it.
# keras3's tuple() converts f's `grad` to Python at once, and customgrad
# needs the R function back to read its formals (grad_convention()).
# Read from reticulate 1.46: rpytools/call.py's make_python_function()
# returns a closure, python_function(), whose one cell holds the R
# function. test-reticulate-internals.R fails if that changes.

# The items of keras3's tuple(value, grad), an R list, with grad's R
# function taken out of its wrapper in Python (_bridge.f_result_parts()):
# one call, where converting the wrapper to R made an R function of it
# first, reading its formals (0.24 ms a call, now 0.07).
f_result_parts <- function(result) {
  parts <- the$f_result_parts %||%
    (the$f_result_parts <- customgrad_py()$f_result_parts)
  parts(result)
}

r_function_in <- function(x) {
  if (!inherits(x, "python.builtin.function")) {
    return(x)
  }
  fn <- tryCatch(
    {
      module <- reticulate::py_to_r(reticulate::py_get_attr(x, "__module__"))
      cells <- reticulate::py_get_attr(x, "__closure__")
      if (identical(module, "rpytools.call")) {
        reticulate::py_to_r(reticulate::py_get_item(cells, 0L)$cell_contents)
      }
    },
    error = function(cnd) NULL
  )
  if (is.function(fn)) fn else x
}
