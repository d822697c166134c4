# R host ops on TensorFlow: tf.numpy_function under tf.custom_gradient, run
# where customgrad serves R on the main thread (_host.py, _tensorflow.py).

test_that("TensorFlow graphs that customgrad doesn't run refuse R, classed", {
  skip_unless_backend("tensorflow")
  # A functional model not passed to serve_host_ops().
  model <- host_model(bessel_k(), sequential = FALSE)
  model |> compile(optimizer = optimizer_adam(0.05), loss = "mse")
  x <- matrix(c(0.5, 1), ncol = 1)
  err <- expect_error(
    fit(model, x, besselK(x, 1.5), epochs = 1, verbose = 0),
    class = "customgrad_error_thread"
  )
  expect_match(conditionMessage(err), "serve_host_ops()", fixed = TRUE)
  expect_match(conditionMessage(err), "run_eagerly = TRUE", fixed = TRUE)
  # Then what it says, not compiled again: the model served trains (Adam
  # makes its variables in the step's first trace, which was refused).
  serve_host_ops(model)
  set.seed(2)
  x_fit <- matrix(runif(64, 0.5, 2), ncol = 1)
  fit(
    model,
    x_fit,
    besselK(1.3 * x_fit, 1.5),
    epochs = 40,
    batch_size = 16,
    verbose = 0
  )
  expect_equal(as.vector(as.array(model$weights[[1]])), 1.3, tolerance = 1e-2)
  tf <- reticulate::import("tensorflow")
  bk <- bessel_k()
  expect_error(
    customgrad_call(tf$`function`(function(x) bk(x))(
      op_convert_to_tensor(x_host, "float32")
    )),
    class = "customgrad_error_thread"
  )
})

test_that("errors of f and grad in host callbacks are classed", {
  skip_unless_backend("tensorflow")
  expect_host_errors_classed()
})

test_that("value_like is asked for where it is missing, and checked", {
  skip_unless_backend("tensorflow")
  expect_value_like_checked()
})

test_that("exporting a model that computes in R is refused, saying why", {
  skip_unless_backend("tensorflow")
  model <- host_model(bessel_k())
  err <- expect_error(
    model$export(withr::local_tempfile()),
    class = "customgrad_error_thread"
  )
  expect_match(conditionMessage(err), "can't hold R", fixed = TRUE)
  expect_match(conditionMessage(err), "save_model()", fixed = TRUE)
})
