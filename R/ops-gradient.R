#' Ready-made custom-gradient operations
#'
#' Operations whose gradient is not the derivative of their value, or is
#' computed a safer way, that training code needs and `keras.ops` lacks.
#' Each is a custom-gradient function (see [op_custom_gradient()]), traced
#' once and replayed in Python on every backend; each `op_*()` that is
#' used as a layer has a `layer_*()` form, which saves and loads with a
#' model without further arguments (see [layer_custom_gradient()]).
#'
#' With `x` the input, `g` the upstream gradient (the gradient of the loss
#' with respect to the result) and `dx` the gradient passed on to `x`:
#'
#' * `op_gradient_reversal(x, lambda)`: \eqn{y = x}, \eqn{dx = -\lambda g}.
#'   The gradient reversal layer of domain-adversarial training (Ganin and
#'   Lempitsky, 2015): what comes before it learns to *increase* the loss of
#'   what comes after it. `lambda` may be a scalar Keras variable
#'   ([keras3::keras_variable()], `trainable = FALSE`) to change it during
#'   training, from a callback: `lambda$assign(0.5)`. The layer then holds
#'   the variable as a weight, so it is saved with the model (and on JAX,
#'   reaches the training step).
#' * `op_gradient_scale(x, scale)`: \eqn{y = x}, \eqn{dx = s g}. Slows down
#'   (`scale < 1`) or speeds up the learning of what comes before, or stops
#'   it (`scale = 0`, as [keras3::op_stop_gradient()]).
#' * `op_gradient_clip_value(x, min, max)`: \eqn{y = x},
#'   \eqn{dx = \min(\max(g, a), b)} element by element.
#' * `op_gradient_clip_norm(x, max_norm)`: \eqn{y = x},
#'   \eqn{dx = g \min(1, c / \lVert g \rVert_2)}, with the L2 norm over the
#'   whole tensor (as `tf.clip_by_norm()`).
#'   Both clip on the backward pass only, at this point of the model,
#'   unlike an optimizer's `clipnorm`, which clips the parameters' gradients.
#' * `op_straight_through(x, f)`: \eqn{y = f(x)}, \eqn{dx = g}: the
#'   straight-through estimator (Bengio et al., 2013) for a step function
#'   `f` whose derivative is zero almost everywhere (`"sign"`, `"round"`,
#'   `"floor"`, `"ceil"`, binarisation, quantisation).
#' * `op_log1pexp(x)`: \eqn{y = \log(1 + e^x)}, computed as
#'   \eqn{\max(x, 0) + \log(1 + e^{-|x|})}, and
#'   \eqn{dx = g \,\sigma(x)} with \eqn{\sigma} the logistic function:
#'   finite for every `x` where the naive formula overflows (past
#'   `x = 88` in float32) and its gradient is `NaN`.
#'
#' `vignette("techniques")` uses them in models: a ramped reversal for
#' domain-adversarial training, straight-through quantisation, a clip layer
#' against an optimizer's `clipnorm`, and `log1pexp` in float32.
#'
#' The gradients of `op_gradient_reversal()`, `op_gradient_scale()`, the
#' clips and `op_straight_through()` are deliberately not the derivatives
#' of their values, so [gradcheck()] fails for them by design; the tests
#' check them against the formulas above. `op_log1pexp()`'s passes
#' [gradcheck()].
#'
#' @param x A tensor (or an R array).
#' @param lambda The factor \eqn{\lambda} of the reversed gradient: a
#'   number, or a scalar Keras variable whose current value is used.
#' @param scale The factor \eqn{s} of the gradient.
#' @param min,max The bounds \eqn{a \le b} of the gradient's elements.
#' @param max_norm The largest L2 norm \eqn{c > 0} of the gradient.
#' @param f The step function: the name of a keras3 operation without its
#'   `op_` prefix (`"sign"`, `"round"`, `"floor"`, `"ceil"`), or an R
#'   function of a tensor. A layer saved with an R function loads with its
#'   saved traces only.
#' @param object,... For the `layer_*()` forms: what to compose the layer
#'   with, and `name`, `dtype`, `trainable`, as in [layer_custom_gradient()].
#' @returns For `op_*()`, a tensor: the operation's value, which is `x`'s
#'   own for the reversal, the scale and the clips. For `layer_*()`, as
#'   keras3's `layer_*()` functions: the layer if `object` is missing, the
#'   model it was added to if `object` is a model, or the layer's output if
#'   `object` is a tensor.
#' @seealso [op_custom_gradient()] to write your own;
#'   [layer_custom_gradient()] for a layer of any custom-gradient function;
#'   [gradcheck()]; [keras3::op_stop_gradient()]; `vignette("techniques")`
#'   for each op in a trained model.
#' @name gradient_ops
#' @aliases gradient-ops
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' # The value passes through; the gradient is reversed and scaled by 0.5.
#' g <- op_grad(\(x) op_sum(op_gradient_reversal(x, lambda = 0.5) * 3))
#' g(c(1, 2))
#'
#' # Round forward, identity backward: a rounding that still trains.
#' op_grad(\(x) op_sum(op_straight_through(x, "round")))(c(0.2, 1.7))
#'
#' # Scaled, clipped by value, clipped by norm: only the gradient changes.
#' x <- c(3, -4)
#' op_grad(\(x) op_sum(op_gradient_scale(x, 0.1) * 10))(x) # 1, 1
#' op_grad(\(x) op_sum(op_gradient_clip_value(x, -1, 1) * 5))(x) # 1, 1
#' # upstream c(3, -4) (norm 5) clipped to norm 1: 0.6, -0.8
#' op_grad(\(x) op_sum(op_gradient_clip_norm(x, 1) * c(3, -4)))(x)
#'
#' # No overflow at x = 100, and the gradient is 1.
#' op_log1pexp(100)
#' op_grad(op_log1pexp)(100)
#'
#' # As a layer: the dense layer below is trained against the loss.
#' model <- keras_model_sequential(input_shape = 2) |>
#'   layer_dense(2) |>
#'   layer_gradient_reversal(lambda = 1) |>
#'   layer_dense(1)
#'
#' # A reversal whose weight a callback ramps from 0 to 1 over 10 epochs.
#' lambda <- keras_variable(0, trainable = FALSE)
#' model <- keras_model_sequential(input_shape = 2) |>
#'   layer_dense(2) |>
#'   layer_gradient_reversal(lambda = lambda) |>
#'   layer_dense(1)
#' ramp <- callback_lambda(
#'   on_epoch_begin = \(epoch, logs) lambda$assign(min(1, (epoch - 1) / 9))
#' )
#' # model |> fit(..., epochs = 10, callbacks = list(ramp))
#'
#' # Every op has a layer form, composed as keras3's layers are.
#' model <- keras_model_sequential(input_shape = 2) |>
#'   layer_dense(4) |>
#'   layer_gradient_clip_norm(max_norm = 1) |>
#'   layer_gradient_clip_value(min = -0.1, max = 0.1) |>
#'   layer_gradient_scale(scale = 0.5) |>
#'   layer_straight_through("round") |>
#'   layer_dense(1)
#'
#' # A layer by itself: the value passes, the gradient is halved.
#' halve <- layer_gradient_scale(scale = 0.5)
#' x32 <- op_convert_to_tensor(c(1, 2), "float32")
#' op_grad(\(x) op_sum(halve(x)))(x32) # 0.5, 0.5
NULL

#' @rdname gradient_ops
#' @export
op_gradient_reversal <- function(x, lambda = 1) {
  check_required(x)
  if (is_keras_variable(lambda)) {
    op <- ready_made_op("gradient_reversal_by")
    return(apply_ready_made(op, x, lambda = lambda))
  }
  apply_ready_made(ready_made_op("gradient_reversal", lambda = lambda), x)
}

#' @rdname gradient_ops
#' @export
op_gradient_scale <- function(x, scale) {
  check_required(x)
  check_required(scale)
  apply_ready_made(ready_made_op("gradient_scale", scale = scale), x)
}

#' @rdname gradient_ops
#' @export
op_gradient_clip_value <- function(x, min, max) {
  check_required(x)
  check_required(min)
  check_required(max)
  fn <- ready_made_op("gradient_clip_value", min = min, max = max)
  apply_ready_made(fn, x)
}

#' @rdname gradient_ops
#' @export
op_gradient_clip_norm <- function(x, max_norm) {
  check_required(x)
  check_required(max_norm)
  apply_ready_made(ready_made_op("gradient_clip_norm", max_norm = max_norm), x)
}

#' @rdname gradient_ops
#' @export
op_straight_through <- function(x, f = "sign") {
  check_required(x)
  apply_ready_made(ready_made_op("straight_through", f = f), x)
}

#' @rdname gradient_ops
#' @export
op_log1pexp <- function(x) {
  check_required(x)
  apply_ready_made(ready_made_op("log1pexp"), x)
}

#' @rdname gradient_ops
#' @export
layer_gradient_reversal <- function(object, lambda = 1, ...) {
  object <- if (missing(object)) NULL else object
  ready_made_layer(object, "gradient_reversal", list(lambda = lambda), ...)
}

#' @rdname gradient_ops
#' @export
layer_gradient_scale <- function(object, scale, ...) {
  object <- if (missing(object)) NULL else object
  check_required(scale)
  ready_made_layer(object, "gradient_scale", list(scale = scale), ...)
}

#' @rdname gradient_ops
#' @export
layer_gradient_clip_value <- function(object, min, max, ...) {
  object <- if (missing(object)) NULL else object
  check_required(min)
  check_required(max)
  ready_made_layer(
    object,
    "gradient_clip_value",
    list(min = min, max = max),
    ...
  )
}

#' @rdname gradient_ops
#' @export
layer_gradient_clip_norm <- function(object, max_norm, ...) {
  object <- if (missing(object)) NULL else object
  check_required(max_norm)
  ready_made_layer(object, "gradient_clip_norm", list(max_norm = max_norm), ...)
}

#' @rdname gradient_ops
#' @export
layer_straight_through <- function(object, f = "sign", ...) {
  object <- if (missing(object)) NULL else object
  ready_made_layer(object, "straight_through", list(f = f), ...)
}

# The makers of the ready-made ops: each takes the op's parameters
# (checked) and returns a custom-gradient function of x alone, so that the
# parameters are constants of its trace.
ready_made_makers <- list(
  gradient_reversal = function(lambda = 1, call = NULL) {
    if (is_keras_variable(lambda)) {
      return(ready_made_op("gradient_reversal_by"))
    }
    lambda <- check_number(
      lambda,
      hint = "To change it during training, pass a scalar Keras variable: {.code keras_variable(1, trainable = FALSE)}.",
      call = call
    )
    op_custom_gradient(function(x) {
      tuple(x, function(upstream) upstream * -lambda)
    })
  },
  # lambda a Keras variable: an input of the op after x (the layer passes
  # it), read at each call rather than fixed in the trace.
  gradient_reversal_by = function(call = NULL) {
    op_custom_gradient(function(x, lambda) {
      tuple(x, function(upstream) list(upstream * -lambda, NULL))
    })
  },
  gradient_scale = function(scale, call = NULL) {
    scale <- check_number(scale, call = call)
    op_custom_gradient(function(x) {
      tuple(x, function(upstream) upstream * scale)
    })
  },
  gradient_clip_value = function(min, max, call = NULL) {
    min <- check_number(min, call = call)
    max <- check_number(max, call = call)
    if (min > max) {
      abort_customgrad(
        c(
          "{.arg min} must not be greater than {.arg max}.",
          "x" = "{.arg min} is {min} and {.arg max} is {max}."
        ),
        class = "bad_argument",
        call = call
      )
    }
    op_custom_gradient(function(x) {
      tuple(x, function(upstream) keras3::op_clip(upstream, min, max))
    })
  },
  gradient_clip_norm = function(max_norm, call = NULL) {
    max_norm <- check_number(max_norm, min = 0, call = call)
    op_custom_gradient(function(x) {
      tuple(x, function(upstream) {
        norm <- keras3::op_sqrt(keras3::op_sum(keras3::op_square(upstream)))
        # min(1, c / norm), and 1 where the norm is 0.
        factor <- keras3::op_minimum(
          1,
          max_norm / keras3::op_maximum(norm, max_norm)
        )
        upstream * factor
      })
    })
  },
  straight_through = function(f = "sign", call = NULL) {
    step <- step_function(f, call = call)
    op_custom_gradient(function(x) {
      tuple(step(x), function(upstream) upstream)
    })
  },
  log1pexp = function(call = NULL) {
    op_custom_gradient(function(x) {
      value <- keras3::op_maximum(x, 0) +
        keras3::op_log1p(keras3::op_exp(-keras3::op_abs(x)))
      tuple(value, function(upstream) upstream * keras3::op_sigmoid(x))
    })
  }
)

# The ready-made op `name` made with `...`: made once per parameter values
# and kept, so that a loop calling it traces once.
ready_made_op <- function(name, ..., call = rlang::caller_env()) {
  key <- rlang::hash(list(name, ...))
  fn <- the$ready_made[[key]]
  if (is.null(fn)) {
    if (length(the$ready_made) >= 64L) {
      rm(list = names(the$ready_made), envir = the$ready_made)
    }
    fn <- ready_made_makers[[name]](..., call = call)
    assign(key, fn, envir = the$ready_made)
  }
  fn
}

# The ready-made op `fn` applied to `x` (and to the Keras variables in
# `...`), with errors about the call naming the caller's
# (`op_gradient_scale(x, 2)`), not `fn(x)`.
apply_ready_made <- function(fn, x, ..., call = sys.call(-1)) {
  state <- environment(fn)$.customgrad_state
  call_custom_gradient(state, list(x = x, ...), call = call)
}

# The maker of a ready-made op saved as "customgrad::<name>", or NULL.
ready_made_maker <- function(name) {
  if (!is.character(name) || !startsWith(name, "customgrad::")) {
    return(NULL)
  }
  ready_made_makers[[sub("^customgrad::", "", name)]]
}

# The layer of the ready-made op `op` (not `name`: `...` passes the
# layer's name on). Arguments that are Keras variables are the layer's
# weights, which it passes to the op after its input (the maker returns an
# op of them too); the others are constants of the op.
ready_made_layer <- function(
  object,
  op,
  arguments,
  ...,
  call = rlang::caller_env()
) {
  f <- do.call(ready_made_makers[[op]], c(arguments, list(call = call)))
  variables <- Filter(is_keras_variable, arguments)
  arguments <- arguments[setdiff(names(arguments), names(variables))]
  # An R function can't be saved: such a layer loads with its traces.
  saveable <- !any(vapply(arguments, is.function, TRUE))
  new_custom_gradient_layer(
    object,
    f,
    function_name = if (saveable) paste0("customgrad::", op),
    arguments = if (saveable) arguments,
    variables = if (length(variables) > 0) variables,
    ...,
    call = call
  )
}

is_keras_variable <- function(x) {
  inherits(x, keras_variable_class)
}

# The forward function of op_straight_through(): a keras3 op by name, or an
# R function.
step_function <- function(f, call = rlang::caller_env()) {
  if (is.function(f)) {
    return(f)
  }
  if (rlang::is_string(f)) {
    fn <- get0(
      paste0("op_", f),
      envir = asNamespace("keras3"),
      mode = "function"
    )
    if (!is.null(fn)) {
      return(fn)
    }
  }
  abort_customgrad(
    c(
      "{.arg f} must be a function or the name of a keras3 operation.",
      "x" = if (rlang::is_string(f)) {
        "keras3 has no {.fn op_{f}}."
      } else {
        "It is {describe_object(f)}."
      },
      "i" = "Use {.val sign}, {.val round}, {.val floor}, {.val ceil}, or a function of a tensor."
    ),
    class = "bad_argument",
    call = call
  )
}
