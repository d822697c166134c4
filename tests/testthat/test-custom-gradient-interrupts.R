# Time limits while f, grad or fit() run: the error reaches the caller, the
# session stays usable, the next gradient is right, and no half-recorded
# trace is kept. (User interrupts, which need signals sent seconds apart,
# are in tests/soak, run by `make soak`.)

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
