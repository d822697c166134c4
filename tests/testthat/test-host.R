# R's own numerics as a differentiable op: a custom-gradient function that
# reads tensor values in R runs R in the backend's host callback inside
# compiled computations (inst/python/customgrad/_host.py).

test_that("an R function of R values is differentiable eagerly", {
  skip_if_no_backend()
  bk <- bessel_k()
  x <- op_convert_to_tensor(x_host, "float32")
  expect_values(as.array(bk(x)), besselK(x_host, 1.5))
  expect_values(
    as.array(op_grad(function(x) op_sum(bk(x)))(x)),
    dbessel_k(x_host)
  )
})

test_that("op_compile() runs it in a host callback, value and gradient", {
  skip_if_no_backend()
  for (trace in c(FALSE, TRUE)) {
    expect_host_compiles(bessel_k(trace = trace))
  }
})

test_that("a host op's value and gradient enter R twice a call, eagerly and compiled", {
  skip_if_no_backend()
  # Once for f, once for grad: a callback more per call would cost every
  # call of every R host op (the issue "customgrad's own cost per call").
  bk <- bessel_k()
  x <- op_convert_to_tensor(x_host, "float32")
  eager <- op_value_and_grad(function(x) op_sum(bk(x)))
  steps <- list(eager = eager, compiled = op_compile(eager))
  for (step in steps) {
    # The first calls trace and compile (on TensorFlow the second call
    # compiles the eager gradient's replay).
    step(x)
    step(x)
    before <- r_calls_so_far()
    out <- step(x * 2)
    expect_identical(r_calls_so_far() - before, 2L)
    expect_values(as.array(out[[2]]), dbessel_k(x_host * 2))
  }
})

test_that("a traced function that falls back says so once, then compiles", {
  skip_if_no_backend()
  bk <- bessel_k(trace = TRUE)
  x <- op_convert_to_tensor(x_host, "float32")
  expect_message(bk(x), class = "customgrad_message_fallback")
  expect_host_compiles(bk)
})

test_that("value_like must name an argument or be a function", {
  f <- function(x, nu) tuple(x, function(up) up)
  expect_error(
    op_custom_gradient(f, value_like = "y"),
    class = "customgrad_error_value_like"
  )
  expect_error(
    op_custom_gradient(f, value_like = 1),
    class = "customgrad_error_value_like"
  )
  expect_no_error(op_custom_gradient(f, value_like = "nu"))
  expect_no_error(op_custom_gradient(f, value_like = \(x, nu) x))
})

test_that("a model with it trains, predicts and evaluates", {
  skip_if_no_backend()
  # Keras' default compilation (on TensorFlow where R serves the steps:
  # test-model-steps.R), and eagerly.
  expect_host_model_trains(run_eagerly = FALSE)
  expect_host_model_trains(run_eagerly = TRUE)
})

test_that("value_like may be a function of the inputs (integrate())", {
  skip_if_no_backend()
  # The integral of exp(-t * x^2) over t in [0, 1], (1 - exp(-x^2)) / x^2,
  # by integrate(), and its derivative by Leibniz's rule: the integral of
  # -2 t x exp(-t x^2).
  integral <- op_custom_gradient(
    trace = FALSE,
    value_like = \(x) op_sum(x),
    function(x) {
      xv <- as.numeric(x)
      value <- integrate(function(t) exp(-t * xv^2), 0, 1)$value
      tuple(op_convert_to_tensor(value, op_dtype(x)), function(up) {
        d <- integrate(function(t) -2 * t * xv * exp(-t * xv^2), 0, 1)$value
        up * op_convert_to_tensor(d, op_dtype(x))
      })
    }
  )
  x <- op_convert_to_tensor(1.5, "float32")
  out <- op_compile(op_value_and_grad(function(x) integral(x)))(x)
  expect_values(as.array(out$value), (1 - exp(-2.25)) / 2.25, 1e-4)
  expect_values(
    as.array(out$grad),
    2 * exp(-2.25) / 1.5 - 2 * (1 - exp(-2.25)) / 1.5^3,
    1e-4
  )
})

test_that("a host op of an expression (x * 2) traces inside op_grad()", {
  skip_if_no_backend()
  # Keras infers x * 2's shape on a sparse placeholder: the host op takes
  # it dense.
  bk <- bessel_k()
  g <- op_grad(\(x) op_sum(bk(x * 2)), trace = "strict")
  x <- op_convert_to_tensor(x_host / 2, "float32")
  expect_values(as.array(g(x)), 2 * dbessel_k(x_host))
})

test_that("a model with a host op saves, and loads with its function", {
  skip_if_no_backend()
  bessel_k <- bessel_k()
  # Saved by the name the layer was made with.
  model <- keras_model_sequential(input_shape = 1) |>
    layer_custom_gradient(bessel_k)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  # No trace runs without R: the function is needed, and asked for by name.
  err <- expect_error(
    load_model(path),
    class = "customgrad_error_load_function"
  )
  expect_match(
    conditionMessage(err),
    "custom_objects = list(bessel_k",
    fixed = TRUE
  )
  loaded <- load_model(path, custom_objects = list(bessel_k = bessel_k))
  # Called eagerly (TensorFlow's predict() reaches R only when the model
  # runs eagerly: test-host-tensorflow.R).
  x <- op_convert_to_tensor(matrix(c(0.5, 1), ncol = 1), "float32")
  expect_values(as.array(loaded(x)), besselK(c(0.5, 1), 1.5))
})
