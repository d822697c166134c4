#' A layer that applies a custom-gradient function
#'
#' `layer_custom_gradient()` makes a Keras layer of a custom-gradient
#' function: the function's value in the forward pass, its `grad` in the
#' backward pass. Compose it as any `layer_*()` of keras3: with `|>` in a
#' Sequential model or on a functional model's tensors, or call it in a
#' `Model()` subclass.
#'
#' @section When R runs:
#' The layer traces `f` once, on the symbolic input a model gives it (with
#' an unknown batch size), and replays that trace in Python for every batch
#' size after that: `fit()`, `evaluate()` and `predict()` run without R on
#' every backend, also with `jit_compile = TRUE`. A function that can't be
#' traced runs R at every step instead (see [op_custom_gradient()]); R then
#' can't run inside XLA (`jit_compile = TRUE` on TensorFlow) or on other
#' threads. On TensorFlow, Keras' compiled steps of a model holding such a
#' function reach R where R's main thread serves them: added to a
#' Sequential model, the layer arranges it; for another model, call
#' [serve_host_ops()] on it.
#'
#' @section Options of `f`:
#' The layer calls `f` with its input alone. Give `f` its options in a
#' closure, where they become constants of the trace (and are saved with
#' it): `layer_custom_gradient(op_custom_gradient(\(x) my_f(x, axis = 2L)))`.
#' keras3's [keras3::layer_lambda()] passes options too, with `arguments =
#' list(axis = 2L)` (an R integer stays an integer), but calls `f` through
#' R at every step on PyTorch, and [keras3::save_model()] refuses a `Lambda`
#' layer holding a custom-gradient function (Keras could not load it again).
#'
#' @section Saving and loading:
#' [keras3::save_model()] saves the layer with the name of its function and
#' its traces. [keras3::load_model()] finds the function again by that name
#' in `custom_objects` (`load_model(path, custom_objects = list(log1pexp =
#' log1pexp))`) or among objects registered with
#' [keras3::register_keras_serializable()] (give it the `name`:
#' `register_keras_serializable(log1pexp, name = "log1pexp")`); customgrad's
#' own layers ([layer_gradient_reversal()] and the like) need neither.
#' Without the function, the saved traces run alone: predictions and training
#' work for inputs of the shapes and dtypes traced (any batch size). That is
#' also how the model loads in Python without R:
#'
#' ```python
#' import sys
#' # "<customgrad>/python" is system.file("python", package = "customgrad")
#' sys.path.insert(0, "<customgrad>/python")
#' import customgrad.layers  # registers the layer with Keras
#' model = keras.saving.load_model("model.keras")
#' ```
#'
#' A call the saved traces can't serve, or a function whose trace holds
#' something that can't be saved (a captured Keras variable), is an error of
#' class `customgrad_error_load_function` saying which function to supply.
#'
#' Each saved trace carries the number of its format. Traces saved by a
#' newer customgrad in a format this one doesn't read (or by an older one
#' than it still reads) are an error of class `customgrad_error_load_format`
#' when the model would run on them: upgrade customgrad, or load the model
#' with its function in `custom_objects`, which stands in for the traces
#' (saving the model again then writes this customgrad's format).
#'
#' @section Exporting:
#' `model$export(path)` writes a model's forward pass for serving without
#' Keras, R or customgrad; the layer's trace is exported as the operations
#' it recorded. Measured with Keras 3.15, TensorFlow 2.21, JAX 0.7 and
#' PyTorch 2.13, on models with `layer_custom_gradient(log1pexp)`:
#'
#' * TensorFlow and JAX: `format = "tf_saved_model"` (the default) works:
#'   `tf$saved_model$load(path)$serve(x)` gives the model's predictions,
#'   for any batch size. The SavedModel is for inference; TensorFlow warns,
#'   loading one exported on JAX, that it holds no custom gradients.
#' * TensorFlow, `format = "onnx"` (with the `tf2onnx` package): the layers
#'   export as any other, but tf2onnx leaves some operations unconverted in
#'   any model: `op_log1p()`, which `log1pexp()` uses, makes a file that
#'   ONNX Runtime refuses. On JAX, Keras converts with the `jax2onnx`
#'   package, which needs JAX 0.8.1 or newer: not measured.
#' * PyTorch: `format = "tf_saved_model"` fails for every model, with or
#'   without customgrad ("Detected mismatch between the structure of
#'   `inputs` and `dynamic_shapes`"), and `format = "torch"`
#'   (`torch.export`) fixes the batch size at 1 for every model.
#'   `format = "onnx"` exports [layer_gradient_reversal()] and functions
#'   such as `\(x) tuple(op_tanh(x), grad)`, but fails on a function whose
#'   forward pass negates a tensor (`-op_abs(x)` in `log1pexp()`), with
#'   "Couldn't export operator aten::to".
#'
#' To export from PyTorch, save the model with [keras3::save_model()], load
#' it with `KERAS_BACKEND` set to `"tensorflow"` or `"jax"` (a model saved
#' on one backend loads on the others), and export it there.
#'
#' @param object What to compose the layer with: a Sequential model (the
#'   layer is added to it), a tensor (the layer is called on it), or missing
#'   (the layer is returned), as in keras3's `layer_*()` functions.
#' @param f A custom-gradient function made with [op_custom_gradient()], or
#'   a function returning `tuple(value, grad)`, which is passed to
#'   [op_custom_gradient()]. It is called with the layer's input.
#' @param ... Passed on to `keras.Layer`: `name`, `dtype`, `trainable`.
#' @returns As keras3's `layer_*()` functions: the layer, the model it was
#'   added to, or the layer's output.
#' @seealso [layer_gradient_reversal()] and the other ready-made layers.
#' @export
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' \dontshow{
#' # TensorFlow deletes its autograph files when Python exits, which Python
#' # embedded in R doesn't: remove those this example makes.
#' autograph_files <- function() {
#'   tmp <- reticulate::import("tempfile")$gettempdir()
#'   Sys.glob(file.path(tmp, "__autograph_generated_file*"))
#' }
#' before <- autograph_files()
#' }
#' log1pexp <- op_custom_gradient(\(x) {
#'   grad <- function(upstream) upstream / (1 + op_exp(-x))
#'   tuple(op_relu(x) + op_log1p(op_exp(-op_abs(x))), grad)
#' })
#'
#' inputs <- keras_input(shape = 3)
#' outputs <- inputs |>
#'   layer_dense(4) |>
#'   layer_custom_gradient(log1pexp) |>
#'   layer_dense(1)
#' model <- keras_model(inputs, outputs)
#' model |> compile(optimizer = "sgd", loss = "mse")
#' x <- matrix(rnorm(96), ncol = 3)
#' y <- rowSums(x)
#' history <- model |> fit(x, y, epochs = 2, verbose = 0)
#'
#' path <- tempfile(fileext = ".keras")
#' save_model(model, path)
#' model2 <- load_model(path, custom_objects = list(log1pexp = log1pexp))
#' stopifnot(all.equal(
#'   predict(model, x, verbose = 0),
#'   predict(model2, x, verbose = 0)
#' ))
#' \dontshow{unlink(setdiff(autograph_files(), before))}
layer_custom_gradient <- function(object, f, ...) {
  check_required(f)
  object <- if (missing(object)) NULL else object
  name <- function_name(rlang::enexpr(f), f)
  if (!is_custom_gradient_callable(f)) {
    check_function(f)
    if (!inherits(f, "customgrad_function")) {
      f <- op_custom_gradient(f)
    }
  }
  new_custom_gradient_layer(object, f, name, ...)
}

# The layer: customgrad's Python Layer over the function's Python callable,
# composed with `object` the way keras3 composes its layers.
new_custom_gradient_layer <- function(
  object,
  f,
  function_name,
  arguments = NULL,
  ...,
  variables = NULL,
  call = rlang::caller_env()
) {
  layers <- customgrad_py("layers", call = call)
  layer <- layers$CustomGradient(
    `function` = f,
    function_name = function_name,
    arguments = arguments,
    variables = variables,
    ...
  )
  if (is.null(object)) {
    return(layer)
  }
  if (inherits(object, keras_sequential_class)) {
    object$add(layer)
    # Its steps may hold R host ops (model-steps.R).
    customgrad_py("_model_steps", call = call)$serve_steps(object)
    return(invisible(object))
  }
  layer(object)
}

# A custom-gradient function that came back from Python as reticulate's
# wrapper of its Python callable (an argument of a keras3 Model subclass's
# initialize(), say): it is used as it is.
is_custom_gradient_callable <- function(f) {
  reticulate::is_py_object(f) && reticulate::py_has_attr(f, "core")
}

# The name a saved layer finds its function by: the variable the user
# passed, else the one op_custom_gradient() was given; NULL for anonymous
# functions (the saved traces must do then).
function_name <- function(expr, f) {
  if (is.symbol(expr)) {
    return(as.character(expr))
  }
  label <- if (inherits(f, "customgrad_function")) {
    environment(f)$.customgrad_state$label
  }
  if (is.character(label) && identical(make.names(label), label)) label
}

# Called from Python (customgrad.layers) while a saved layer is loaded:
# customgrad's ready-made ops by name, or a plain R function given in
# `custom_objects` made a custom-gradient function. NULL when neither.
resolve_layer_function <- function(name, arguments = NULL, found = NULL) {
  maker <- ready_made_maker(name)
  if (!is.null(maker)) {
    return(reticulate::r_to_py(do.call(maker, as.list(arguments))))
  }
  fn <- r_function_in(found)
  if (inherits(fn, "customgrad_function")) {
    return(reticulate::r_to_py(fn))
  }
  if (is.function(fn)) {
    return(reticulate::r_to_py(op_custom_gradient(fn)))
  }
  NULL
}
