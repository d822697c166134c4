# User interrupts (SIGINT to a child R session) while f, grad or fit() run:
# caught as interrupts, and every gradient after them is right. Run by
# `make soak` (tools/soak.R): they send signals seconds apart and depend on
# when the child process is where.

test_that("SIGINTs during untraced grads and traces of f are caught, and every gradient after them is right", {
  session <- local_child_session()

  # An untraced function whose grad is slow R code, in an untraced
  # op_grad(): a traced one runs h's R code only while it traces (on JAX
  # and TensorFlow, as inside tf.function), and the interrupts would land
  # in the loop's own R code between steps of half a millisecond.
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
    g <<- op_grad(\(x) op_sum(h(x)), trace = FALSE)
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

test_that("SIGINTs during a compiled fit() with an R host op are caught, and the model trains after them", {
  # TensorFlow: the served steps (serve_host_ops()), whose host callbacks
  # R's main thread runs while it waits; JAX and PyTorch: their own.
  session <- local_child_session()
  session$run(function() {
    slow_exp <- slow_exp_host_op()
    new_model <<- function() {
      model <- keras_model_sequential(input_shape = 1) |>
        layer_dense(1, use_bias = FALSE, kernel_initializer = "zeros") |>
        layer_custom_gradient(slow_exp)
      model |> compile(optimizer = optimizer_sgd(0.05), loss = "mse")
    }
    set.seed(1)
    x <<- matrix(runif(64, 0, 1), ncol = 1)
    y <<- exp(0.5 * x)
    model <<- new_model()
    invisible(fit(model, x, y, epochs = 1, batch_size = 8, verbose = 0))
  })
  run <- run_interrupted(session, function() {
    caught_interrupts(
      \(made) {
        tryCatch(
          fit(model, x, y, epochs = 1, batch_size = 8, verbose = 0),
          # JAX: an interrupted compiled step took the model's weights
          # with it; make it again, as the error says (else every fit()
          # fails at once, and the interrupts land in the loop itself).
          customgrad_error_weights_lost = \(cnd) model <<- new_model()
        )
      },
      6
    )
  })
  expect_gt(run$caught, 0)
  weight <- session$run(function() {
    model <- new_model()
    fit(model, x, y, epochs = 40, batch_size = 8, verbose = 0)
    as.numeric(as.array(model$weights[[1]]))
  })
  expect_equal(weight, 0.5, tolerance = 0.05)
})

test_that("SIGINTs during a compiled computation with an R host op are caught as interrupts", {
  # JAX's runtime reported each as its XlaRuntimeError, TensorFlow's as
  # an UnknownError, before customgrad took the interrupt back out.
  session <- local_child_session()
  session$run(function() {
    slow_exp <- slow_exp_host_op()
    g <<- op_compile(op_value_and_grad(\(x) op_sum(slow_exp(x))))
    x <<- op_convert_to_tensor(c(0.1, 0.2))
    invisible(g(x))
  })
  run <- run_interrupted(session, function() {
    caught_interrupts(\(made) g(x), 6)
  })
  expect_stopped_by_interrupts(run, 8)
  grad <- session$run(\() as.numeric(g(x)[[2]]))
  expect_equal(grad, exp(c(0.1, 0.2)), tolerance = 1e-6)
})
