# serve_host_ops(): a model's compiled steps holding R host ops, on every
# backend (model-steps.R, inst/python/customgrad/_model_steps.py).

test_that("serve_host_ops() takes a Keras model only", {
  skip_if_no_backend()
  err <- expect_error(
    serve_host_ops(42),
    class = "customgrad_error_bad_argument"
  )
  expect_match(conditionMessage(err), "must be a Keras model", fixed = TRUE)
  expect_error(serve_host_ops(), class = "customgrad_error_bad_argument")
})

test_that("a functional model trains, evaluates and predicts compiled", {
  skip_if_no_backend()
  model <- host_model(bessel_k(), sequential = FALSE)
  expect_identical(serve_host_ops(model), model)
  expect_identical(serve_host_ops(model), model) # once is enough
  expect_host_model_trains(run_eagerly = FALSE, model = model)
  # compile() again makes new steps, served too.
  model |> compile(optimizer = optimizer_sgd(0.001), loss = "mse")
  x <- matrix(c(0.5, 1, 2), ncol = 1)
  expect_no_error(fit(model, x, besselK(1.3 * x, 1.5), epochs = 1, verbose = 0))
  expect_values(
    predict(model, x, verbose = 0),
    besselK(as.array(model$weights[[1]])[[1]] * x, 1.5),
    1e-5
  )
})

test_that("an R error in the op stops fit(), evaluate() and predict(), classed", {
  skip_if_no_backend()
  armed <- NULL
  boom <- op_custom_gradient(trace = FALSE, value_like = "x", function(x) {
    xv <- as.array(x)
    if (identical(armed, "f")) {
      rlang::abort("boom in f", class = "my_error")
    }
    tuple(op_convert_to_tensor(exp(xv), op_dtype(x)), function(up) {
      if (identical(armed, "grad")) {
        stop("boom in grad")
      }
      up * op_convert_to_tensor(exp(xv), op_dtype(x))
    })
  })
  x <- matrix(c(0.1, 0.2, 0.3), ncol = 1)
  # A model per error: on JAX a failed compiled step loses the model's
  # weights (Keras hands them to the step to reuse their memory), and the
  # model says so when it is used again.
  trained <- function() {
    armed <<- NULL
    model <- host_model(boom, sequential = FALSE) |> serve_host_ops()
    model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
    fit(model, x, x, epochs = 1, verbose = 0)
    model
  }
  for (run in list(
    \(model) fit(model, x, x, epochs = 1, verbose = 0),
    \(model) evaluate(model, x, x, verbose = 0),
    \(model) predict(model, x, verbose = 0)
  )) {
    model <- trained()
    armed <- "f"
    err <- expect_error(run(model), class = "customgrad_error_f")
    expect_s3_class(err, "my_error")
    expect_match(conditionMessage(err), "boom in f", fixed = TRUE)
    armed <- NULL
    if (config_backend() == "jax") {
      # The failed step consumed the weights: said, not Keras' TypeError.
      err <- expect_error(
        predict(model, x, verbose = 0),
        class = "customgrad_error_weights_lost"
      )
      expect_match(conditionMessage(err), "load_model_weights()", fixed = TRUE)
    } else {
      expect_no_error(predict(model, x, verbose = 0))
    }
  }
  model <- trained()
  armed <- "grad"
  err <- expect_error(
    fit(model, x, x, epochs = 1, verbose = 0),
    class = "customgrad_error_grad"
  )
  expect_match(conditionMessage(err), "boom in grad", fixed = TRUE)
})

test_that("a served model saves, and loads to be served again", {
  skip_if_no_backend()
  bk <- bessel_k()
  model <- host_model(bk, sequential = FALSE) |> serve_host_ops()
  model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  x <- matrix(c(0.5, 1, 2), ncol = 1)
  fit(model, x, besselK(x, 1.5), epochs = 1, verbose = 0)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  # host_model() names the function `op`.
  loaded <- load_model(path, custom_objects = list(op = bk)) |> serve_host_ops()
  expect_values(
    predict(loaded, x, verbose = 0),
    predict(model, x, verbose = 0),
    1e-6
  )
  expect_no_error(fit(loaded, x, besselK(x, 1.5), epochs = 1, verbose = 0))
})
