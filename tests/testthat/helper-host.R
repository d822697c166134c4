# besselK(x, 1.5) and its derivative, -(K[nu - 1] + K[nu + 1]) / 2, as a
# user writes it: R at every call (trace = FALSE), in host callbacks where
# the backend compiles.
bessel_k <- function(value_like = "x", trace = FALSE) {
  dk <- function(x, nu) -(besselK(x, nu - 1) + besselK(x, nu + 1)) / 2
  op_custom_gradient(
    function(x) {
      xv <- as.array(x)
      tuple(
        op_convert_to_tensor(besselK(xv, 1.5), op_dtype(x)),
        function(up) up * op_convert_to_tensor(dk(xv, 1.5), op_dtype(x))
      )
    },
    trace = trace,
    value_like = value_like
  )
}
dbessel_k <- function(x) -(besselK(x, 0.5) + besselK(x, 2.5)) / 2

x_host <- c(0.5, 1, 2)

# op_compile() of `bk` (bessel_k()) and of its gradient, called twice with
# new values, gives R's values and derivatives.
expect_host_compiles <- function(bk) {
  x <- op_convert_to_tensor(x_host, "float32")
  value <- op_compile(function(x) bk(x))
  grad <- op_compile(op_grad(function(x) op_sum(bk(x))))
  for (scale in c(1, 2)) {
    expect_values(as.array(value(x * scale)), besselK(x_host * scale, 1.5))
    expect_values(as.array(grad(x * scale)), dbessel_k(x_host * scale))
  }
}

# A model whose last layer is an R host op (test-host.R): a dense layer
# without bias, its weight starting at 1, then `op`. Sequential (where
# layer_custom_gradient() serves its steps: serve_host_ops()) or functional
# (where it can't).
host_model <- function(op, sequential = TRUE) {
  if (sequential) {
    return(
      keras_model_sequential(input_shape = 1) |>
        layer_dense(1, use_bias = FALSE, kernel_initializer = "ones") |>
        layer_custom_gradient(op)
    )
  }
  inputs <- keras_input(shape = 1)
  outputs <- inputs |>
    layer_dense(1, use_bias = FALSE, kernel_initializer = "ones") |>
    layer_custom_gradient(op)
  keras_model(inputs, outputs)
}

# fit() learns the weight 1.3 of besselK(1.3 x, 1.5) through R's besselK()
# and its R gradient; predict() and evaluate() run R too.
expect_host_model_trains <- function(
  run_eagerly,
  model = host_model(bessel_k())
) {
  model |>
    compile(
      optimizer = optimizer_adam(0.05),
      loss = "mse",
      run_eagerly = run_eagerly
    )
  set.seed(1)
  x <- matrix(runif(256, 0.5, 2), ncol = 1)
  y <- besselK(1.3 * x, 1.5)
  fit(model, x, y, epochs = 30, batch_size = 32, verbose = 0)
  testthat::expect_equal(
    as.vector(as.array(model$weights[[1]])),
    1.3,
    tolerance = 1e-3
  )
  expect_values(
    predict(model, x[1:3, , drop = FALSE], verbose = 0),
    besselK(1.3 * x[1:3], 1.5),
    1e-3
  )
  testthat::expect_lt(evaluate(model, x, y, verbose = 0)$loss, 1e-6)
}

# Inside a compiled computation (TensorFlow, JAX) an error of f or of grad
# in a host callback stops it as customgrad_error_f / _grad, keeping the
# error's own classes; the next call runs as before.
expect_host_errors_classed <- function() {
  checked <- op_custom_gradient(trace = FALSE, value_like = "x", function(x) {
    xv <- as.array(x)
    if (any(xv > 10)) {
      stop("too big: ", max(xv))
    }
    tuple(op_convert_to_tensor(exp(xv), op_dtype(x)), function(up) {
      if (any(xv > 5)) {
        rlang::abort("refused", class = "my_error")
      }
      up * op_convert_to_tensor(exp(xv), op_dtype(x))
    })
  })
  grad <- op_compile(op_grad(function(x) op_sum(checked(x))))
  x <- function(v) op_convert_to_tensor(v, "float32")
  err <- testthat::expect_error(grad(x(c(1, 20))), class = "customgrad_error_f")
  testthat::expect_s3_class(err, "simpleError")
  testthat::expect_match(conditionMessage(err), "failed in a host callback")
  testthat::expect_match(conditionMessage(err), "too big: 20")
  err <- testthat::expect_error(
    grad(x(c(1, 6))),
    class = "customgrad_error_grad"
  )
  testthat::expect_s3_class(err, "my_error")
  expect_values(as.array(grad(x(c(1, 2)))), exp(c(1, 2)))
}

# Inside a compiled computation, a function that reads tensor values in R
# and has no value_like is refused with an error that names it; one whose
# value has another shape than value_like gives is refused too. A traced
# op_compile() of it called from R falls back to R, saying why.
expect_value_like_checked <- function() {
  bk <- bessel_k(value_like = NULL)
  x <- op_convert_to_tensor(x_host, "float32")
  expect_values(as.array(bk(x)), besselK(x_host, 1.5)) # eagerly: no need
  testthat::expect_message(
    value <- op_compile(function(x) bk(x))(x),
    "reads its inputs' values.*value_like",
    class = "customgrad_message_fallback"
  )
  expect_values(as.array(value), besselK(x_host, 1.5))
  # R's code compiled by the backend: bk runs in the compiled computation.
  err <- testthat::expect_error(
    op_compile(function(x) bk(x), trace = FALSE)(x),
    class = "customgrad_error_value_like"
  )
  testthat::expect_match(
    conditionMessage(err),
    "value_like = \"x\"",
    fixed = TRUE
  )
  wrong <- op_custom_gradient(trace = FALSE, value_like = "x", function(x) {
    xv <- as.array(x)
    tuple(op_convert_to_tensor(sum(xv), op_dtype(x)), function(up) up)
  })
  err <- testthat::expect_error(
    op_compile(function(x) wrong(x))(x),
    class = "customgrad_error_value_like"
  )
  testthat::expect_match(conditionMessage(err), "has shape ()", fixed = TRUE)
}
