# Time limits and user interrupts while f, grad or fit() run: the error
# reaches the caller, the session stays usable, the next gradient is right,
# and no half-recorded trace is kept.

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

# --- User interrupts (SIGINT to a child R session) -------------------------

test_that("SIGINTs during untraced grads and traces of f are caught, and every gradient after them is right", {
  session <- local_child_session()

  # An untraced function whose grad is slow R code.
  session$run(function() {
    h <<- op_custom_gradient(
      function(x) {
        tuple(x * 3, function(upstream) {
          Sys.sleep(0.02)
          upstream * 3
        })
      },
      trace = FALSE
    )
    g <<- op_grad(\(x) op_sum(h(x)))
    invisible(g(op_convert_to_tensor(c(1, 2))))
  })
  untraced <- run_interrupted(session, function() {
    caught_interrupts(\(made) g(op_convert_to_tensor(c(1, 2))), 6)
  })
  expect_stopped_by_interrupts(untraced, 8)
  expect_gt(untraced$steps, 8)
  expect_equal(
    session$run(\() {
      c(as.array(op_grad(\(x) op_sum(h(x)))(op_convert_to_tensor(c(1, 2)))))
    }),
    c(3, 3)
  )

  # A new traced function per step, whose f is slow: interrupts land while
  # it is traced; an interrupted one must not keep a half-made trace.
  traced <- run_interrupted(session, function() {
    caught_interrupts(
      function(made) {
        h <- op_custom_gradient(function(x) {
          Sys.sleep(0.05)
          tuple(x * 3, function(upstream) upstream * 3)
        })
        made(h)
        op_grad(h)(2)
      },
      6
    )
  })
  expect_stopped_by_interrupts(traced, 8)
  # Each interrupted function (made before the interrupt) kept at most one
  # trace, a whole one: its value and gradient are right.
  after <- session$run(function() {
    made <- Filter(Negate(is.null), interrupted)
    vapply(
      made,
      function(h) {
        core <- environment(h)$.customgrad_state$py$core
        c(
          cached = if (is.null(core)) 0 else reticulate::py_to_r(core$n_cached),
          value = as.array(h(2)),
          grad = as.array(op_grad(h)(2))
        )
      },
      c(cached = 0, value = 0, grad = 0)
    )
  })
  expect_gt(ncol(after), 0)
  expect_true(all(after["cached", ] <= 1))
  expect_equal(after["value", ], rep(6, ncol(after)))
  expect_equal(after["grad", ], rep(3, ncol(after)))
})

test_that("SIGINTs during an eager fit() are caught, and the function trains a new model after them", {
  session <- local_child_session()
  session$run(function() {
    log1pexp <- op_custom_gradient(
      function(x) {
        Sys.sleep(0.02)
        tuple(op_log(1 + op_exp(x)), function(upstream) {
          upstream * op_sigmoid(x)
        })
      },
      trace = FALSE
    )
    new_model <<- function(run_eagerly) {
      inputs <- keras_input(shape = 3)
      outputs <- inputs |>
        layer_dense(4, kernel_initializer = "ones") |>
        layer_custom_gradient(log1pexp) |>
        layer_dense(1, kernel_initializer = "ones")
      model <- keras_model(inputs, outputs)
      model |>
        compile(
          optimizer = optimizer_sgd(0.01),
          loss = "mse",
          run_eagerly = run_eagerly
        )
    }
    set.seed(1)
    x <<- matrix(rnorm(192), ncol = 3)
    y <<- matrix(rowSums(x), ncol = 1)
    model <<- new_model(run_eagerly = TRUE)
    invisible(fit(model, x, y, epochs = 1, batch_size = 8, verbose = 0))
  })
  run <- run_interrupted(session, function() {
    caught_interrupts(
      \(made) fit(model, x, y, epochs = 1, batch_size = 8, verbose = 0),
      6
    )
  })
  # Interrupts reach the caller as interrupts. (Keras on JAX leaves a model
  # interrupted in an eager fit() unable to fit again, "'NoneType' object
  # is not callable", with a plain R function as well.)
  expect_gt(run$caught, 0)
  loss <- session$run(function() {
    history <- fit(
      new_model(run_eagerly = FALSE),
      x,
      y,
      epochs = 3,
      batch_size = 16,
      verbose = 0
    )
    history$metrics$loss
  })
  expect_true(all(is.finite(loss)))
  expect_lt(loss[[3]], loss[[1]])
})

test_that("an interrupt during R code in grad that runs for seconds stops it within about a second", {
  session <- local_child_session()
  session$run(function() {
    # R code that runs past the half second for which customgrad holds
    # interrupts in a callback: R takes them at once after that.
    slow <<- op_custom_gradient(
      function(x) {
        tuple(x * 2, function(upstream) {
          started <- Sys.time()
          while (Sys.time() - started < 30) {
            NULL
          }
          upstream * 2
        })
      },
      trace = FALSE
    )
  })
  run <- run_interrupted(
    session,
    function() {
      started <- Sys.time()
      caught <- tryCatch(
        {
          op_grad(slow)(1)
          FALSE
        },
        interrupt = function(cnd) TRUE
      )
      list(caught = caught, seconds = as.numeric(Sys.time() - started, "secs"))
    },
    n = 1
  )
  expect_true(run$caught)
  # The interrupt came 1 s in; without the watchdog it would wait for the
  # 30 s loop to end.
  expect_lt(run$seconds, 5)
  expect_equal(session$run(\() as.numeric(op_grad(\(x) x * 2)(1))), 2)
})
