# TensorFlow's own conventions: GradientTape, tf.function, variables=.

test_that("the R documentation example runs verbatim with tape$gradient()", {
  skip_unless_backend("tensorflow")
  `%as%` <- reticulate::`%as%`
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
  tf <- reticulate::import("tensorflow")
  x <- tf$constant(100)
  with(tf$GradientTape() %as% tape, {
    tape$watch(x)
    y <- log1pexp(x)
  })
  expect_equal(as.numeric(tape$gradient(y, x)), 1)
})

test_that("TF docs' linear_poly: grad gets variables= and returns their gradients", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  weights <- tf$Variable(c(1, 2), dtype = "float32")
  seen <- NULL
  linear_poly <- op_custom_gradient(function(x) {
    w0 <- tf$gather(weights, 0L)
    w1 <- tf$gather(weights, 1L)
    poly <- w1 * x + w0
    grad_fn <- function(dpoly, variables = NULL) {
      seen <<- variables
      grad_xs <- dpoly * w1
      # d poly / d weights = (1, x); TF's docs stack (x, 1), which is the
      # gradient only when the weights are ordered the other way round.
      dy_dw <- dpoly * tf$stack(list(x^0, x^1))
      grad_vars <- list(tf$reduce_sum(tf$reshape(dy_dw, c(2L, -1L)), axis = 1L))
      list(grad_xs, grad_vars)
    }
    tuple(poly, grad_fn)
  })
  x <- tf$constant(3, dtype = "float32")
  tape <- tf$GradientTape(persistent = TRUE)
  tape$`__enter__`()
  tape$watch(x)
  y <- linear_poly(x)
  tape$`__exit__`(NULL, NULL, NULL)
  expect_values(as.array(y), 2 * 3 + 1)
  expect_values(as.array(tape$gradient(y, x)), 2)
  expect_values(as.array(tape$gradient(y, weights)), c(1, 3))
  expect_length(seen, 1)
  expect_true(reticulate::py_eval("lambda a, b: a is b")(seen[[1]], weights))
})

test_that("variable gradients are cast to the variable's dtype, or a classed error", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  weights <- tf$Variable(c(1, 2), dtype = "float32")
  for (cast_to in c("float64", "bool")) {
    h <- op_custom_gradient(
      function(x) {
        grad <- function(upstream, variables = NULL) {
          list(upstream * weights, list(op_cast(upstream * x, cast_to)))
        }
        tuple(x * weights, grad)
      },
      trace = FALSE
    )
    x <- tf$constant(c(3, 4), dtype = "float32")
    tape <- tf$GradientTape()
    y <- local({
      local_tape(tape)
      tape$watch(x)
      tf$reduce_sum(h(x))
    })
    if (cast_to == "bool") {
      expect_error(
        customgrad_call(tape$gradient(y, weights)),
        class = "customgrad_error_grad_dtype"
      )
    } else {
      g <- tape$gradient(y, weights)
      expect_identical(reticulate::py_to_r(g$dtype$name), "float32")
      expect_values(as.array(g), c(3, 4))
    }
  }
})

test_that("untraced, a variable read in f with a grad lacking `variables` is a classed error", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  w <- tf$Variable(2, dtype = "float32")
  # Traced, captured variables get no gradient (test-trace.R).
  h <- op_custom_gradient(
    function(x) {
      tuple(x * w, function(upstream) upstream * w)
    },
    trace = FALSE
  )
  x <- tf$constant(3, dtype = "float32")
  tape <- tf$GradientTape()
  tape$`__enter__`()
  tape$watch(x)
  y <- h(x)
  tape$`__exit__`(NULL, NULL, NULL)
  err <- expect_error(
    customgrad_call(tape$gradient(y, x)),
    class = "customgrad_error_grad_variables"
  )
  expect_match(conditionMessage(err), "read 1 TensorFlow variable")
})

test_that("inside tf.function R runs only while tracing", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  calls <- c(f = 0, grad = 0)
  h <- op_custom_gradient(function(x) {
    calls[["f"]] <<- calls[["f"]] + 1
    tuple(x^3, function(upstream) {
      calls[["grad"]] <<- calls[["grad"]] + 1
      upstream * 3 * x^2
    })
  })
  step <- tf$`function`(
    function(x) {
      tape <- tf$GradientTape()
      tape$`__enter__`()
      tape$watch(x)
      y <- tf$reduce_sum(h(x))
      tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, x)
    },
    autograph = FALSE
  )
  for (v in 1:3) {
    g <- reticulate::py_call(step, tf$constant(c(v, 2), dtype = "float32"))
    expect_values(as.array(g), 3 * c(v, 2)^2)
  }
  expect_identical(calls, c(f = 1, grad = 1))
})

test_that("untraced and eager, grad runs only when a tape can use it", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  runs <- 0
  h <- op_custom_gradient(
    function(x) {
      tuple(x^3, function(upstream) {
        runs <<- runs + 1
        upstream * 3 * x^2
      })
    },
    trace = FALSE
  )
  x <- tf$constant(c(1, 2), dtype = "float32")
  expect_values(as.array(h(x)), c(1, 8))
  expect_identical(runs, 0)
  tape <- tf$GradientTape()
  tape$`__enter__`()
  tape$watch(x)
  y <- tf$reduce_sum(h(x))
  tape$`__exit__`(NULL, NULL, NULL)
  expect_values(as.array(tape$gradient(y, x)), c(3, 12))
  expect_identical(runs, 1)
})

test_that("nested GradientTapes differentiate the gradient again", {
  skip_unless_backend("tensorflow")
  tf <- reticulate::import("tensorflow", convert = FALSE)
  cube <- op_custom_gradient(function(x) {
    tuple(x^3, function(upstream) upstream * 3 * x^2)
  })
  x <- tf$constant(c(1, 2), dtype = "float32")
  outer <- tf$GradientTape()
  outer$`__enter__`()
  outer$watch(x)
  inner <- tf$GradientTape()
  inner$`__enter__`()
  inner$watch(x)
  y <- tf$reduce_sum(cube(x))
  inner$`__exit__`(NULL, NULL, NULL)
  dy <- inner$gradient(y, x)
  outer$`__exit__`(NULL, NULL, NULL)
  expect_values(as.array(dy), 3 * c(1, 2)^2)
  expect_values(as.array(outer$gradient(dy, x)), 6 * c(1, 2))
})

test_that("tf.py_function inside tf.function works or is customgrad_error_thread, never an abort", {
  skip_if_no_backend()
  skip_if_no_callr()
  result <- callr::r(
    function() {
      library(customgrad)
      tf <- reticulate::import("tensorflow", convert = FALSE)
      untraced <- op_custom_gradient(
        function(x) tuple(x * 2, \(upstream) upstream * 2),
        trace = FALSE
      )
      wrapped <- tf[["function"]](function(x) {
        tf$py_function(
          reticulate::r_to_py(untraced),
          list(x),
          Tout = tf$float32
        )
      })
      out <- tryCatch(
        as.array(wrapped(tf$constant(c(1, 2), dtype = tf$float32))),
        error = function(e) e
      )
      list(
        value = if (!inherits(out, "error")) as.vector(out),
        message = if (inherits(out, "error")) conditionMessage(out),
        after = as.vector(as.array(untraced(c(1, 2))))
      )
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "tensorflow"),
    timeout = 300
  )
  if (is.null(result$value)) {
    expect_match(result$message, "ThreadError|non-main thread")
  } else {
    expect_equal(result$value, c(2, 4))
  }
  expect_equal(result$after, c(2, 4))
})
