# customgrad's own errors: every error class, listed once in
# `error_classes` (the table in ?customgrad_errors is made from it), and
# abort_customgrad(), which signals them.

#' Errors customgrad signals
#'
#' Every error customgrad signals has the class `customgrad_error` and one
#' more specific class from the table below, so that code can catch one
#' kind with `tryCatch(..., customgrad_error_grad_shape = function(e) ...)`
#' or test for it with `testthat::expect_error(class = )`. The message says
#' what went wrong (`x`) and what to do (`i`), and names the call that
#' failed. Errors raised by your own `f` or `grad` (`stop()`,
#' `rlang::abort()`) come back with their own classes, unchanged (in
#' compiled computations and in a served model's `fit()`, as
#' `customgrad_error_f` or `customgrad_error_grad` that keep them).
#'
#' @eval rd_error_table()
#' @name customgrad_errors
#' @aliases customgrad-errors
#' @keywords internal
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' h <- op_custom_gradient(function(x) {
#'   tuple(x * 2, function(upstream) list(upstream, upstream))
#' })
#' err <- tryCatch(op_grad(h)(1), customgrad_error = function(e) e)
#' class(err)
#' err
NULL

# class (without the `customgrad_error_` prefix) = when it is signalled.
error_classes <- c(
  not_function = "An argument that must be a function is not one.",
  f_result = "`f` returned something other than `tuple(value, grad)`.",
  grad_not_function = "The second element of `f`'s result is not a function.",
  grad_signature = "The gradient function takes no argument for the upstream gradient.",
  grad_count = "The gradient function returned more or fewer gradients than `f` has inputs.",
  grad_shape = "A gradient's shape differs from its input's.",
  grad_structure = "A gradient is nested unlike its input, or a non-tensor input got a gradient.",
  grad_variables = "`f` read TensorFlow variables that the gradient function does not account for.",
  input = "An input can't be passed to a custom-gradient, gradient or compiled function.",
  na = "An R value with `NA` reached a tensor (an argument, or an operand of arithmetic): tensors have no `NA`.",
  grad_dtype = "The gradient function returned a gradient that is not floating point (a string, a logical, an integer, a complex number).",
  trace_arg = "`trace` is not `TRUE`, `FALSE` or `\"strict\"`.",
  trace = "A function with `trace = \"strict\"` could not be traced.",
  trace_read = "Tracing met something a trace can't hold (a value read in R, R's random numbers). It never reaches you: the function falls back to R at every call, with a message giving this reason.",
  symbolic_tensor = "A symbolic tensor's values were read in R outside tracing.",
  unsupported_op = "An R math function has no `keras.ops` equivalent for tensors.",
  wrt = "`wrt` names arguments that are not there.",
  wrt_dtype = "A gradient was asked for with respect to a tensor that is not floating point.",
  not_scalar = "`op_grad()` got a non-scalar value without an `upstream`.",
  upstream = "`upstream` does not match `f`'s value in nesting or shape.",
  gradcheck = "`gradcheck(error = TRUE)` found a gradient that disagrees with finite differences.",
  gradcheck_input = "`gradcheck()` has no numeric input to check.",
  gradcheck_structure = "`f` returned a different number of tensors for the perturbed inputs of `gradcheck()`.",
  bad_argument = "A tolerance or flag argument has a wrong value.",
  option = "A customgrad option (`customgrad.max_traces`) has a wrong value.",
  backend_unknown = "A backend name other than \"tensorflow\", \"jax\" or \"torch\".",
  backend_started = "Keras already runs with another backend than the one chosen.",
  backend_unsupported = "Keras runs with a backend customgrad does not support.",
  backend_missing = "The Python in use lacks the backend's module.",
  python_missing = "No Python with Keras 3 is chosen or found, and none could be provisioned.",
  python_version = "The Python in use, or its Keras, is older than customgrad needs (`SystemRequirements` in its DESCRIPTION).",
  load_function = "A loaded custom-gradient layer can't find its function, and its saved traces don't serve the call.",
  not_serializable = "`save_model()` met a custom-gradient function where Keras would save it by a name that loading can't find: in a `Lambda` layer made with `layer_lambda()`, or as an activation.",
  load_format = "A loaded custom-gradient layer would run on its saved traces, and they have a format this customgrad doesn't read: saved by a newer customgrad, or by an older one than it still reads.",
  thread = "A custom-gradient function was called from a Python thread other than the main one, where R can't run.",
  value_like = "A custom-gradient function that R runs in a host callback (inside a compiled computation) has no `value_like` to give its value's shape and dtype, or R's value is not shaped as `value_like` says.",
  distributed = "`use_distributed()` was asked for what the backend can't do (several processes on TensorFlow or PyTorch, devices on PyTorch).",
  distributed_started = "`use_distributed()` was called after the backend started, when processes and devices can no longer be arranged.",
  f = "The backend raised an error while `f` ran (wrong input types, say); the backend's error is the parent, and its Python classes stay among the error's. Also any error of `f` in a host callback, and in `fit()`, `evaluate()` or `predict()` of a model passed to `serve_host_ops()`, keeping the error's own classes.",
  grad = "The backend raised an error while the gradient function ran; the backend's error is the parent, and its Python classes stay among the error's. Also any error of the gradient function in a host callback or in a served model's `fit()`, keeping its own classes.",
  weights_lost = "A model passed to `serve_host_ops()` lost its weights on JAX when an error stopped its compiled step (Keras hands the weights to the step), and was used again.",
  recursion = "Custom-gradient functions called each other (or themselves) so deep that R's C stack would run out: unbounded recursion.",
  transform = "A transform can't honour a custom gradient: forward mode (a Jacobian-vector product), TensorFlow's `vectorized_map()`, or batching a function that R runs at every call.",
  internal = "R and Python disagreed about a message between them: a bug in customgrad, please report it."
)

rd_error_table <- function() {
  rows <- paste0(
    "\\code{customgrad_error_",
    names(error_classes),
    "} \\tab ",
    gsub("`([^`]*)`", "\\\\code{\\1}", error_classes),
    " \\cr"
  )
  c(
    "@section Error classes:",
    "\\tabular{ll}{",
    "\\strong{Class} \\tab \\strong{When} \\cr",
    rows,
    "}"
  )
}

abort_customgrad <- function(
  message,
  class,
  ...,
  call = rlang::caller_env(),
  parent = NULL,
  .envir = parent.frame()
) {
  if (!class %in% names(error_classes)) {
    rlang::abort(
      paste0("Undeclared customgrad error class: ", class),
      .internal = TRUE
    )
  }
  cli::cli_abort(
    message,
    class = c(paste0("customgrad_error_", class), "customgrad_error"),
    ...,
    call = call,
    parent = parent,
    .envir = .envir
  )
}

# A customgrad error's fields are R's, also when it carries a backend's
# Python classes (whose `$` method reads Python attributes).
#' @export
`$.customgrad_error` <- function(x, name) .subset2(x, name)

#' @export
`[[.customgrad_error` <- function(x, i, ...) .subset2(x, i)
