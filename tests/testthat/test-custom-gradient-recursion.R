# Custom-gradient functions that call themselves, in f and in grad, traced
# and untraced: the values and gradients R gives when it runs every call,
# and unbounded recursion as a classed error. Run on each backend.

# x^3 as x * (x * x): f calls the function itself, the depth kept in R
# state, 3 levels; grad uses the inner level's value, so a second derivative
# goes through the inner levels' own gradients. `calls` counts runs of f.
new_cube <- function(trace = TRUE) {
  counts <- new.env()
  counts$depth <- 0
  counts$calls <- 0
  cube <- op_custom_gradient(
    function(x) {
      counts$depth <- counts$depth + 1
      counts$calls <- counts$calls + 1
      on.exit(counts$depth <- counts$depth - 1)
      k <- counts$depth
      if (k == 3) {
        return(tuple(x * 1, function(upstream) upstream))
      }
      inner <- cube(x)
      tuple(x * inner, function(upstream) upstream * (4 - k) * inner)
    },
    trace = trace
  )
  list(h = cube, counts = counts)
}

# exp, with a gradient written with the function itself, so that it can be
# differentiated again: every derivative is exp(x).
new_selfexp <- function(trace = TRUE) {
  counts <- new.env()
  counts$calls <- 0
  selfexp <- op_custom_gradient(
    function(x) {
      counts$calls <- counts$calls + 1
      e <- op_exp(x)
      tuple(e, function(upstream) upstream * selfexp(x))
    },
    trace = trace
  )
  list(h = selfexp, counts = counts)
}

sum_of <- function(h) {
  force(h)
  function(x) op_sum(h(x))
}

# The n-th derivative of sum(h(x)), elementwise, through op_grad().
derivative <- function(h, n) {
  for (i in seq_len(n)) {
    h <- op_grad(sum_of(h))
  }
  h
}

for (trace in c(TRUE, FALSE)) {
  test_that(paste0("f calling itself 3 levels deep, trace = ", trace), {
    skip_if_no_backend()
    fn <- new_cube(trace)
    x <- c(1.5, -2, 0.5)
    expect_tensor(fn$h(x), x^3, tolerance = 1e-6)
    expect_tensor(op_grad(sum_of(fn$h))(x), 3 * x^2, tolerance = 1e-6)
    expect_equal(native_grad(fn$h, x), array(3 * x^2), tolerance = 1e-5)
    expect_tensor(derivative(fn$h, 2)(x), 6 * x, tolerance = 1e-6)
    expect_tensor(
      derivative(fn$h, 3)(x),
      rep(6, 3),
      tolerance = 1e-6
    )
    # R's depth counter is back at 0 after every call.
    expect_identical(fn$counts$depth, 0)
    if (trace) {
      calls <- fn$counts$calls
      expect_tensor(fn$h(x + 1), (x + 1)^3, tolerance = 1e-5)
      expect_tensor(op_grad(sum_of(fn$h))(x + 1), 3 * (x + 1)^2, 1e-5)
      # Replayed: R did not run again.
      expect_identical(fn$counts$calls, calls)
    }
  })

  test_that(paste0("grad calling the function itself, trace = ", trace), {
    skip_if_no_backend()
    fn <- new_selfexp(trace)
    x <- c(-1, 0, 1)
    expect_tensor(fn$h(x), exp(x), tolerance = 1e-6)
    expect_tensor(op_grad(sum_of(fn$h))(x), exp(x), tolerance = 1e-6)
    expect_equal(native_grad(fn$h, x), array(exp(x)), tolerance = 1e-5)
    expect_tensor(derivative(fn$h, 2)(x), exp(x), tolerance = 1e-6)
    expect_tensor(
      derivative(fn$h, 3)(x),
      exp(x),
      tolerance = 1e-5
    )
    # The issue's calls: a scalar, first and second derivative.
    expect_tensor(derivative(fn$h, 2)(1), exp(1), tolerance = 1e-6)
    if (trace) {
      # Traced once per signature (a re-entry during grad's trace is that
      # trace itself), never endlessly.
      expect_lte(fn$counts$calls, 12)
    }
  })

  test_that(paste0("recursive functions compiled, trace = ", trace), {
    skip_if_no_backend()
    cube <- new_cube(trace)$h
    selfexp <- new_selfexp(trace)$h
    x <- c(0.5, 2)
    expect_tensor(op_compile(cube)(x), x^3, tolerance = 1e-6)
    expect_tensor(
      op_compile(op_grad(sum_of(cube)))(x),
      3 * x^2,
      tolerance = 1e-6
    )
    expect_tensor(
      op_compile(derivative(cube, 2))(x),
      6 * x,
      tolerance = 1e-6
    )
    expect_tensor(
      op_compile(derivative(selfexp, 2))(x),
      exp(x),
      tolerance = 1e-6
    )
  })

  test_that(paste0("recursive functions in fit(), trace = ", trace), {
    skip_if_no_backend()
    cube <- new_cube(trace)
    selfexp <- new_selfexp(trace)
    model <- keras_model_sequential(input_shape = 3) |>
      layer_dense(3, kernel_initializer = "ones") |>
      layer_lambda(cube$h) |>
      layer_lambda(selfexp$h) |>
      layer_dense(1, kernel_initializer = "zeros")
    model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
    x <- matrix(seq_len(24) / 200, 8, 3)
    y <- matrix(seq_len(8) / 8, 8, 1)
    history <- model |>
      fit(x, y, epochs = 3, batch_size = 4, verbose = 0, shuffle = FALSE)
    loss <- unlist(history$metrics$loss)
    expect_true(all(is.finite(loss)))
    expect_lt(loss[[3]], loss[[1]])
    expect_identical(cube$counts$depth, 0)
    # The model's value is the functions' analytic one.
    w1 <- model$layers[[1]]$get_weights()
    w4 <- model$layers[[4]]$get_weights()
    hidden <- exp(sweep(x %*% w1[[1]], 2, w1[[2]], "+")^3)
    expect_equal(
      as.vector(as.array(model(op_convert_to_tensor(x, "float32")))),
      drop(hidden %*% w4[[1]]) + as.vector(w4[[2]]),
      tolerance = 1e-4
    )
  })

  test_that(paste0("unbounded recursion is a classed error, trace = ", trace), {
    skip_if_no_backend()
    endless <- op_custom_gradient(
      function(x) tuple(endless(x), function(upstream) upstream),
      trace = trace
    )
    # Traced, the signature falls back to R at every call (see below), which
    # recurses without end too; the error comes before any message.
    expect_error(
      suppressMessages(endless(1), classes = "customgrad_message_fallback"),
      class = "customgrad_error_recursion"
    )
    # grad calling the function on inputs that grow at every level: R runs
    # grad's call of the function only forward, as the gradient needs.
    # Traced, each level's grad would be traced with its f, without end: the
    # signature falls back to R at every call, with the usual message.
    widening <- op_custom_gradient(
      function(x) {
        tuple(x * 2, function(upstream) {
          upstream * op_sum(widening(op_concatenate(list(x, x))))
        })
      },
      trace = trace
    )
    gradient <- function() op_grad(sum_of(widening))(c(1, 2))
    if (trace) {
      expect_message(g <- gradient(), class = "customgrad_message_fallback")
    } else {
      g <- gradient()
    }
    expect_tensor(g, c(12, 12), 1e-6)
    # The session works: the issue's second derivative, then once more.
    selfexp <- new_selfexp(trace)$h
    expect_tensor(derivative(selfexp, 2)(1), exp(1), 1e-6)
    expect_error(endless(1), class = "customgrad_error_recursion")
    expect_tensor(op_grad(sum_of(new_cube(trace)$h))(2), 12, 1e-6)
  })
}

test_that("the recursion error says what happened", {
  skip_if_no_backend()
  endless <- op_custom_gradient(function(x) {
    tuple(endless(x), function(upstream) upstream)
  })
  numbers <- function(x) gsub("[0-9]+", "<n>", x)
  expect_snapshot(endless(1), error = TRUE, transform = numbers)
  # Past Python's bound on nested calls, for a stack R can't measure.
  trace_py <- reticulate::import("customgrad._trace", convert = FALSE)
  old <- trace_py$MAX_DEPTH
  trace_py$MAX_DEPTH <- 3L
  withr::defer(trace_py$MAX_DEPTH <- old)
  expect_snapshot(endless(1), error = TRUE)
})

test_that("where R can't measure its stack (ulimit -s unlimited), Python's limit gives the classed error", {
  skip_if_no_backend()
  # `ulimit -s unlimited` takes a Linux shell (macOS caps the stack, and
  # R on Windows measures its own): R's Cstack_info() size is then NA.
  skip_if_not(identical(Sys.info()[["sysname"]], "Linux"), "needs Linux")
  script <- withr::local_tempfile(fileext = ".R")
  result <- withr::local_tempfile(fileext = ".rds")
  writeLines(
    c(
      "library(customgrad)",
      "out <- list(stack = Cstack_info()[['size']])",
      "for (trace in c(TRUE, FALSE)) {",
      "  endless <- op_custom_gradient(",
      "    function(x) tuple(endless(x), function(upstream) upstream),",
      "    trace = trace",
      "  )",
      "  err <- tryCatch(suppressMessages(endless(1)), error = identity)",
      "  out[[paste0('trace_', trace)]] <- list(",
      "    class = class(err), message = conditionMessage(err)",
      "  )",
      "}",
      "g <- op_grad(function(x) op_sum(x^3))(op_convert_to_tensor(2, 'float64'))",
      "out$after <- as.vector(as.array(g))",
      sprintf("saveRDS(out, '%s')", result)
    ),
    script
  )
  run <- processx::run(
    "sh",
    c(
      "-c",
      'ulimit -s unlimited && exec "$0" "$1"',
      file.path(R.home("bin"), "Rscript"),
      script
    ),
    env = c("current", KERAS_BACKEND = config_backend()),
    error_on_status = FALSE
  )
  expect_identical(run$status, 0L, info = run$stderr)
  out <- readRDS(result)
  expect_true(is.na(out$stack))
  for (trace in c("trace_TRUE", "trace_FALSE")) {
    expect_identical(
      out[[trace]]$class[1:2],
      c("customgrad_error_recursion", "customgrad_error"),
      info = out[[trace]]$message
    )
    expect_match(
      out[[trace]]$message,
      "Python's recursion limit \\(\\d+ frames\\) is nearly reached",
      info = trace
    )
  }
  expect_equal(out$after, 12)
})
