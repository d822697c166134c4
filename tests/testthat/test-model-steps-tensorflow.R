# serve_host_ops() on TensorFlow: Keras' compiled steps traced on R's main
# thread and run where it serves their host callbacks (_tensorflow.py's
# ServedStep).

test_that("XLA is refused, more steps per execution are served", {
  skip_unless_backend("tensorflow")
  model <- host_model(bessel_k(), sequential = FALSE) |> serve_host_ops()
  model |>
    compile(optimizer = optimizer_sgd(0.01), loss = "mse", jit_compile = TRUE)
  x <- matrix(c(0.5, 1, 2), ncol = 1)
  err <- expect_error(
    fit(model, x, besselK(x, 1.5), epochs = 1, verbose = 0),
    class = "customgrad_error_thread"
  )
  expect_match(conditionMessage(err), "jit_compile = FALSE", fixed = TRUE)
  model |>
    compile(
      optimizer = optimizer_adam(0.05),
      loss = "mse",
      steps_per_execution = 4L
    )
  set.seed(2)
  x <- matrix(runif(256, 0.5, 2), ncol = 1)
  fit(
    model,
    x,
    besselK(1.3 * x, 1.5),
    epochs = 30,
    batch_size = 32,
    verbose = 0
  )
  expect_equal(as.vector(as.array(model$weights[[1]])), 1.3, tolerance = 1e-3)
})

test_that("the served step sees the caller's mixed precision", {
  skip_unless_backend("tensorflow")
  previous <- config_dtype_policy()
  config_set_dtype_policy("mixed_float16")
  withr::defer(config_set_dtype_policy(previous))
  model <- host_model(bessel_k(), sequential = FALSE) |> serve_host_ops()
  model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  x <- matrix(c(0.5, 1, 2), ncol = 1)
  fit(model, x, besselK(x, 1.5), epochs = 1, verbose = 0)
  out <- model(op_convert_to_tensor(x))
  expect_identical(op_dtype(out), "float16")
  w <- as.array(model$weights[[1]])[[1]]
  expect_values(predict(model, x, verbose = 0), besselK(w * x, 1.5), 1e-2)
})

test_that("train_on_batch(), test_on_batch() and predict_on_batch() are served", {
  skip_unless_backend("tensorflow")
  model <- host_model(bessel_k(), sequential = FALSE) |> serve_host_ops()
  model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  x <- matrix(c(0.5, 1, 2), ncol = 1)
  y <- besselK(1.3 * x, 1.5)
  expect_values(predict_on_batch(model, x), besselK(x, 1.5), 1e-5)
  loss <- train_on_batch(model, x, y)
  expect_equal(loss, mean((besselK(x, 1.5) - y)^2), tolerance = 1e-4)
  w <- as.array(model$weights[[1]])[[1]]
  expect_gt(w, 1)
  expect_equal(
    test_on_batch(model, x, y),
    mean((besselK(w * x, 1.5) - y)^2),
    tolerance = 1e-3
  )
})
