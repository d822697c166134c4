# Time limits (setTimeLimit()) while f, grad, a host op or fit() run: the
# error reaches the caller, the session stays usable, the next gradient is
# right, and no half-recorded trace is kept. Run by `make soak`
# (tools/soak.R), not `make test`: each runs busy R code until a time limit
# stops it, and the untraced and traced grads are stopped 20 times in a row.

test_that("a time limit in an untraced grad is an error, 20 times out of 20, and the next gradient is right", {
  skip_if_no_backend()
  warm_up()
  slow <- TRUE
  h <- op_custom_gradient(
    function(x) {
      tuple(x * 2, function(upstream) {
        if (slow) {
          busy_past_time_limit()
        }
        upstream * 2
      })
    },
    trace = FALSE
  )
  g <- op_grad(h)
  messages <- vapply(
    1:20,
    function(i) conditionMessage(error_at_time_limit(g(1))),
    ""
  )
  expect_match(messages, "time limit", all = TRUE)
  slow <- FALSE
  expect_tensor(g(1), 2)
  expect_tensor(g(3), 2)
})

test_that("a time limit in grad while it is traced reaches the caller and nothing is cached", {
  skip_if_no_backend()
  warm_up()
  # Changed below: no trace held the old value, so it stops no replays
  # (test-captures.R).
  slow <- TRUE
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) {
      if (slow) {
        busy_past_time_limit()
      }
      upstream * 2
    })
  })
  g <- op_grad(h)
  messages <- vapply(
    1:20,
    function(i) conditionMessage(error_at_time_limit(g(1))),
    ""
  )
  expect_match(messages, "time limit", all = TRUE)
  core <- environment(h)$.customgrad_state$py$core
  expect_identical(reticulate::py_to_r(core$n_cached), 0L)
  slow <- FALSE
  expect_tensor(g(1), 2)
  expect_identical(reticulate::py_to_r(core$n_cached), 1L)
})

test_that("a time limit while fit() traces f reaches the caller; nothing is cached, and the next fit() traces once and trains", {
  skip_if_no_backend()
  warm_up()
  counter <- new.env()
  counter$f <- 0
  slow <- TRUE
  log1pexp <- op_custom_gradient(function(x) {
    counter$f <- counter$f + 1
    if (slow) {
      busy_past_time_limit(0.5)
    }
    tuple(op_log(1 + op_exp(x)), function(upstream) {
      upstream * op_sigmoid(x)
    })
  })
  # Built at its first fit(), so that f is first traced there. A new model
  # for the second fit(): Keras can't fit a model whose building failed
  # (on TensorFlow, not even without customgrad).
  new_model <- function() {
    model <- keras_model_sequential() |>
      layer_dense(4, kernel_initializer = "ones") |>
      layer_custom_gradient(log1pexp) |>
      layer_dense(1, kernel_initializer = "ones")
    model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  }
  data <- regression_data(n = 32)
  err <- error_at_time_limit(
    fit(new_model(), data$x, data$y, batch_size = 8, verbose = 0)
  )
  expect_match(conditionMessage(err), "time limit")
  expect_identical(counter$f, 1)
  core <- environment(log1pexp)$.customgrad_state$py$core
  expect_identical(reticulate::py_to_r(core$n_cached), 0L)
  slow <- FALSE
  loss <- fit_losses(new_model(), data, epochs = 3)
  expect_true(all(is.finite(loss)))
  expect_lt(loss[[3]], loss[[1]])
  expect_lte(counter$f, 1 + 4)
})

test_that("a time limit in the middle of an eager fit(), R running at every step, leaves the model trainable", {
  skip_if_no_backend()
  warm_up()
  # Stopped at the third call of f, in the first fit().
  calls <- 0
  log1pexp <- op_custom_gradient(
    function(x) {
      calls <<- calls + 1
      if (calls == 3) {
        busy_past_time_limit(0.5)
      }
      tuple(op_log(1 + op_exp(x)), function(upstream) {
        upstream * op_sigmoid(x)
      })
    },
    trace = FALSE
  )
  model <- three_layer_model(\(x) layer_custom_gradient(x, log1pexp))
  # Eager, so that R runs at every step (a compiled step runs R only while
  # it is traced).
  model |>
    compile(optimizer = optimizer_sgd(0.01), loss = "mse", run_eagerly = TRUE)
  data <- regression_data(n = 64)
  calls <- 0
  err <- error_at_time_limit(
    fit(model, data$x, data$y, batch_size = 8, verbose = 0)
  )
  expect_match(conditionMessage(err), "time limit")
  expect_identical(calls, 3)
  loss <- fit_losses(model, data, epochs = 3)
  expect_true(all(is.finite(loss)))
  expect_lt(loss[[3]], loss[[1]])
})

test_that("a time limit in R's host op during fit() stops it, and the model trains after", {
  skip_if_no_backend()
  # As Esc / Ctrl+C in R would (tests/soak sends real interrupts): the
  # limit fires in R's besselK() inside Keras' compiled step (JAX, PyTorch)
  # or its eager one (TensorFlow), at the second step.
  calls <- 0
  stall_at <- Inf
  stalled <- op_custom_gradient(trace = FALSE, value_like = "x", function(x) {
    calls <<- calls + 1
    if (calls == stall_at) {
      busy_past_time_limit()
    }
    xv <- as.array(x)
    tuple(
      op_convert_to_tensor(besselK(xv, 1.5), op_dtype(x)),
      function(up) up * op_convert_to_tensor(dbessel_k(xv), op_dtype(x))
    )
  })
  new_model <- function() {
    model <- host_model(stalled)
    model |>
      compile(
        optimizer = optimizer_adam(0.05),
        loss = "mse",
        run_eagerly = config_backend() == "tensorflow"
      )
  }
  model <- new_model()
  set.seed(1)
  x <- matrix(runif(64, 0.5, 2), ncol = 1)
  y <- besselK(1.3 * x, 1.5)
  calls <- 0
  stall_at <- 2
  err <- error_at_time_limit(
    fit(model, x, y, epochs = 1, batch_size = 32, verbose = 0)
  )
  expect_match(conditionMessage(err), "time limit", fixed = TRUE)
  expect_equal(calls, 2)
  if (config_backend() == "jax") {
    # Keras' compiled JAX step is given the model's variables (donated
    # buffers, Keras 3.15), which a failure inside the step deletes: that
    # model can't train again, a new one can.
    model <- new_model()
  }
  history <- fit(model, x, y, epochs = 5, batch_size = 32, verbose = 0)
  expect_lt(history$metrics$loss[[5]], history$metrics$loss[[1]])
})

test_that("a time limit reached while tracing is not kept: the next call traces", {
  skip_if_no_backend()
  # Changed below: no trace held the old value, so it stops no replays
  # (test-captures.R).
  slow <- TRUE
  h <- op_custom_gradient(function(x) {
    if (slow) {
      busy_past_time_limit(0.5)
    }
    tuple(x * 2, function(upstream) upstream * 2)
  })
  err <- error_at_time_limit(h(1))
  expect_match(conditionMessage(err), "time limit")
  slow <- FALSE
  expect_no_message(value <- h(1))
  expect_tensor(value, 2)
  core <- environment(h)$.customgrad_state$py$core
  expect_identical(reticulate::py_to_r(core$n_cached), 1L)
  expect_tensor(op_grad(h)(1), 2)
})
