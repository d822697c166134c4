#' customgrad: custom gradients for Keras 3 on every backend
#'
#' Write a custom gradient once, in R, with [op_custom_gradient()], and use
#' it on the TensorFlow, JAX and PyTorch backends of Keras 3.
#'
#' @section How it is built:
#' R code knows R: it reads the gradient function's arguments, calls it the
#' way it asks, and turns failures into classed R conditions. The Python
#' module in `inst/python/customgrad` knows the backends: one adapter per
#' backend (`tf.custom_gradient`, `jax.custom_gradient`, and the package's
#' own `torch.autograd.Function`) calls R in the forward pass (and in the
#' backward pass when `grad` could not be recorded ahead, see "Speed"), and
#' checks the gradients R returns before the backend sees them.
#'
#' @section Speed:
#' A call from R into Python, or back, costs tens of microseconds in
#' reticulate, more than a small tensor operation. So inside `f` and `grad`
#' customgrad records tensor operations (`op_*()` functions and tensor
#' arithmetic) instead of calling Python for each: they run in Python, in
#' the order written, when `f` or `grad` returns, and their temporaries never
#' reach R. Anything that needs a value (printing, `as.array()`, `$`, an op
#' that is not recorded) runs the recorded operations it depends on first,
#' so results are those of eager code. An op that fails raises an error of
#' class `customgrad_error_op` when `f` or `grad` returns; set
#' `options(customgrad.defer_ops = FALSE)` to run each op where it is
#' written (slower, for debugging).
#'
#' `grad` is also recorded during the forward pass, with a stand-in for
#' `upstream`, when the value is a single tensor and a backward pass can
#' follow: the backward pass then runs its operations in Python without
#' calling R. If `grad` needs `upstream`'s value, reads TensorFlow
#' variables or fails, it runs in the backward pass as usual. Either way it
#' runs once per call; write it without side effects that depend on when it
#' runs.
#'
#' @section Memory:
#' A tensor referenced from R is released only when R's garbage collector
#' runs, and R does not know how big the tensor is. customgrad counts the
#' bytes of tensors it hands to R (results of `op_*()` functions and tensor
#' arithmetic outside `f` and `grad`, values and gradients passed to and from
#' custom-gradient functions, and the values of `f` that the backward pass
#' keeps) and runs a minor `gc()` at the start of the next custom-gradient
#' call once they pass `getOption("customgrad.gc_threshold_mb", 128)`
#' megabytes (or at once past four times that). Set the option before the
#' first customgrad call.
#'
#' @section Options:
#' * `customgrad.gc_threshold_mb`: see "Memory" above.
#' * `customgrad.defer_ops`: `TRUE` (the default) records tensor operations
#'   inside `f` and `grad`; see "Speed" above.
#'
#' @keywords internal
"_PACKAGE"

## usethis namespace: start
## usethis namespace: end
NULL

# The state object that op_custom_gradient() puts into each function it makes.
utils::globalVariables(".customgrad_state")
