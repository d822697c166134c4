# The one internal of reticulate that customgrad reads, for want of a
# public API: the R function inside reticulate's Python wrapper of it.
# keras3's tuple() converts f's `grad` to Python at once, and customgrad
# needs the R function back to read its formals (grad_convention()).
# Read from reticulate 1.46: rpytools/call.py's make_python_function()
# returns a closure, python_function(), whose one cell holds the R
# function. test-reticulate-internals.R fails if that changes.
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
