#' Let a model's compiled steps run R host ops
#'
#' `serve_host_ops()` makes `fit()`, `evaluate()` and `predict()` (and
#' their `*_on_batch()` forms) of a model whose layers hold R host ops run
#' with Keras' default compilation on every backend. An R host op is a
#' custom-gradient function that reads its inputs' values in R, with
#' `value_like` (the section on R's own numerics of
#' [op_custom_gradient()]). Call it once, before or after
#' [keras3::compile()]; [layer_custom_gradient()] calls it on a Sequential
#' model it is added to.
#'
#' On TensorFlow, Keras' compiled step runs R's host callbacks on
#' TensorFlow's own threads while R's main thread waits for the step, and R
#' runs only on its main thread: such a step is refused when it is traced,
#' with an error of class `customgrad_error_thread` that names this
#' function. `serve_host_ops()` has this model's steps (only this model's,
#' nothing process-wide) traced and run on a thread of their own while
#' R's main thread serves the host callbacks; the step sees the caller's
#' dtype policy (mixed precision), name scopes and distribution strategy,
#' and callbacks run on the main thread as before. A model whose steps
#' hold no R host op runs as Keras runs it, on the calling thread.
#' XLA can't hold a host callback: such a step compiled with `jit_compile =
#' TRUE` is refused with an error of class `customgrad_error_thread`.
#'
#' On every backend, an error in `f` or `grad` then stops `fit()`,
#' `evaluate()` and `predict()` as an error of class `customgrad_error_f` or
#' `customgrad_error_grad` that keeps the R error's own classes and
#' message, where Keras or the backend's runtime would hand R another
#' class (JAX's `XlaRuntimeError`, PyTorch's `RuntimeError`). On JAX such
#' an error loses the model's weights (Keras hands them to its compiled
#' steps, which consume them): the model then refuses to run with an error
#' of class `customgrad_error_weights_lost` until its weights are loaded
#' again ([keras3::load_model_weights()], `set_weights()`).
#'
#' The setting is the model object's: a model loaded with
#' [keras3::load_model()] needs `serve_host_ops()` again.
#'
#' @param model A Keras model.
#' @returns `model`, invisibly, for use in a pipe.
#' @seealso [layer_custom_gradient()], [op_custom_gradient()].
#' @export
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' # besselK(x, 1.5) and its derivative, computed in R at every step.
#' bessel_k <- op_custom_gradient(trace = FALSE, value_like = "x", \(x) {
#'   xv <- as.array(x)
#'   slope <- -(besselK(xv, 0.5) + besselK(xv, 2.5)) / 2
#'   tuple(
#'     op_convert_to_tensor(besselK(xv, 1.5), op_dtype(x)),
#'     \(upstream) upstream * op_convert_to_tensor(slope, op_dtype(x))
#'   )
#' })
#' inputs <- keras_input(shape = 1)
#' outputs <- inputs |>
#'   layer_dense(1, use_bias = FALSE, kernel_initializer = "ones") |>
#'   layer_custom_gradient(bessel_k)
#' model <- keras_model(inputs, outputs) |> serve_host_ops()
#' model |> compile(optimizer = optimizer_adam(0.05), loss = "mse")
#' set.seed(3)
#' x <- matrix(runif(256, 0.5, 2), ncol = 1)
#' model |> fit(x, besselK(1.3 * x, 1.5), epochs = 20, verbose = 0)
#' as.numeric(as.array(model$weights[[1]])) # near 1.3
serve_host_ops <- function(model) {
  check_required(model)
  if (!inherits(model, keras_model_class)) {
    abort_argument(
      model,
      "a Keras model",
      "bad_argument",
      "model",
      rlang::current_env()
    )
  }
  customgrad_py("_model_steps")$serve_steps(model)
  invisible(model)
}
