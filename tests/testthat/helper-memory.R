# Helpers for test-custom-gradient-memory.R: what a dropped function
# releases, and the peak memory of long eager loops.

# A custom-gradient function made the way users write factories: `f`
# captures an R environment and a Python object, and the factory's frame
# holds the function too (the case an R -> Python -> R cycle kept alive).
# Returns the function and weak references to both captured objects
# (`refs`).
captured_function_factory <- function(trace = TRUE) {
  big <- new.env()
  big$values <- runif(1e5)
  py_object <- reticulate::py_eval(
    "type('Captured', (), {})()",
    convert = FALSE
  )
  h <- op_custom_gradient(
    function(x) {
      scale <- 2 + 0 * big$values[[1]] + 0 * length(py_object)
      tuple(x * scale, function(upstream) upstream * scale)
    },
    trace = trace
  )
  weakref <- reticulate::import("weakref", convert = FALSE)
  list(
    h = h,
    refs = list(r = rlang::new_weakref(big), python = weakref$ref(py_object))
  )
}

# Expects the objects behind `refs` (see captured_function_factory()) to
# be `released`, or not, after R's collector ran: twice, as a release that
# goes through Python takes two (the first finalises R's reference to a
# Python object, which then drops its reference to an R object).
expect_captured_released <- function(refs, released) {
  gc()
  gc()
  gone <- c(
    r = is.null(rlang::wref_key(refs$r)),
    python = reticulate::py_is_null_xptr(refs$python) ||
      inherits(reticulate::py_call(refs$python), "python.builtin.NoneType")
  )
  expect_identical(gone, c(r = released, python = released))
}
