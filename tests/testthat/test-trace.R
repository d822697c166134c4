# Tracing: f and grad run in R once per input signature, on Keras symbolic
# tensors; later calls replay them in Python. Run on each backend.

# log1pexp that counts how often R runs f and grad.
new_counted_log1pexp <- function(trace = TRUE) {
  counts <- new.env()
  counts$f <- 0
  counts$grad <- 0
  h <- op_custom_gradient(
    function(x) {
      counts$f <- counts$f + 1
      e <- op_exp(x)
      grad <- function(..., upstream = NULL) {
        counts$grad <- counts$grad + 1
        upstream <- upstream %||% ..1
        op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
      }
      tuple(op_log(1 + e), grad)
    },
    trace = trace
  )
  list(h = h, counts = counts)
}

sigmoid <- function(x) 1 / (1 + exp(-x))

core_of <- function(h) reticulate::r_to_py(h)$core

traces_of <- function(h) reticulate::py_to_r(core_of(h)$traces)

test_that("R runs f and grad once per signature; replays match analytic values", {
  skip_if_no_backend()
  fn <- new_counted_log1pexp()
  for (x in list(c(0.5, 2), c(1, -3), c(20, 0))) {
    expect_tensor(fn$h(x), log1p(exp(x)), tolerance = 1e-5)
    grads <- native_grads(function(t) sum(fn$h(t)), x)
    expect_values(grads[[1]], sigmoid(x))
  }
  # One trace for R inputs (eager) and one under the backend's autodiff
  # (tapes see the same eager tensors; jax$grad passes tracers).
  expect_lte(fn$counts$f, 2)
  expect_identical(fn$counts$f, fn$counts$grad)
  expect_equal(fn$counts$f, traces_of(fn$h))
})

test_that("a new shape traces again, and the replay is right for it", {
  skip_if_no_backend()
  fn <- new_counted_log1pexp()
  fn$h(c(1, 2))
  before <- fn$counts$f
  fn$h(c(1, 2, 3))
  expect_identical(fn$counts$f, before + 1)
  expect_tensor(fn$h(c(4, 5, 6)), log1p(exp(c(4, 5, 6))), tolerance = 1e-5)
  expect_identical(fn$counts$f, before + 1)
})

test_that("traced and untraced give the same values and gradients", {
  skip_if_no_backend()
  traced <- new_counted_log1pexp(trace = TRUE)$h
  untraced <- new_counted_log1pexp(trace = FALSE)$h
  x <- c(-30, -1, 0, 2.5, 1000)
  expect_equal(as.array(traced(x)), as.array(untraced(x)))
  expect_equal(
    as.array(op_grad(\(t) sum(traced(t)))(x)),
    as.array(op_grad(\(t) sum(untraced(t)))(x))
  )
  # The custom gradient at x = 1000 is exactly 1 (the naive one is NaN).
  expect_identical(as.array(op_grad(traced)(1000)), array(1))
})

test_that("trace = FALSE runs R at every call, without messages", {
  skip_if_no_backend()
  fn <- new_counted_log1pexp(trace = FALSE)
  expect_no_message(
    for (i in 1:3) {
      native_grads(function(t) sum(fn$h(t)), c(1, 2))
    }
  )
  expect_identical(fn$counts$f, 3)
  expect_identical(fn$counts$grad, 3)
})

test_that("trace = FALSE inside a traced op_grad() runs while it traces on TensorFlow and JAX, at every call on PyTorch", {
  skip_if_no_backend()
  fn <- new_counted_log1pexp(trace = FALSE)
  x <- op_convert_to_tensor(c(-1, 0.5))
  traced <- op_grad(function(t) op_sum(fn$h(t)))
  for (i in 1:5) {
    expect_values(as.array(traced(x)), sigmoid(c(-1, 0.5)), tolerance = 1e-6)
  }
  if (config_backend() == "torch") {
    expect_gte(fn$counts$f, 5) # and once while op_grad() traces
    expect_identical(fn$counts$grad, 5)
  } else {
    # The trace and, on TensorFlow, a first call before it compiles.
    expect_lt(fn$counts$f, 5)
    expect_lt(fn$counts$grad, 5)
  }
  fn$counts$f <- fn$counts$grad <- 0
  untraced <- op_grad(function(t) op_sum(fn$h(t)), trace = FALSE)
  for (i in 1:5) {
    expect_values(as.array(untraced(x)), sigmoid(c(-1, 0.5)), tolerance = 1e-6)
  }
  expect_identical(c(fn$counts$f, fn$counts$grad), c(5, 5))
})

# A function whose f reads a value in R in the way `read` says.
new_reading <- function(read, trace = TRUE) {
  counts <- new.env()
  counts$f <- 0
  h <- op_custom_gradient(
    function(x) {
      counts$f <- counts$f + 1
      k <- read(x)
      tuple(x * k, function(upstream) upstream * k)
    },
    trace = trace
  )
  list(h = h, counts = counts)
}

# Each reads something in R and returns 2.
value_reads <- list(
  "as.numeric()" = function(x) as.numeric(sum(x)) * 0 + 2,
  "if on a tensor" = function(x) if (as.logical(sum(x) > -1e9)) 2 else 3,
  "print()" = function(x) {
    utils::capture.output(print(x))
    2
  },
  "R's RNG" = function(x) stats::runif(1) * 0 + 2,
  # What a trace would fix and nothing sees as a tensor read.
  "the clock" = function(x) as.numeric(Sys.time()) * 0 + 2,
  "an environment variable" = function(x) {
    as.numeric(Sys.getenv("CUSTOMGRAD_TEST_UNSET", "2"))
  },
  # FALSE for the symbolic tensors R traces with: the other branch.
  "op_is_tensor()" = function(x) if (op_is_tensor(x)) 2 else 3,
  # A backend function called directly: it takes real tensors only.
  "an op Keras can't record" = function(x) {
    keras3::keras$src$backend$numpy$exp(x)
    2
  }
)

test_that("a value read in R falls back to R at every call, with one message", {
  skip_if_no_backend()
  for (what in names(value_reads)) {
    fn <- new_reading(value_reads[[what]])
    expect_message(
      y <- fn$h(c(1, 2)),
      class = "customgrad_message_fallback",
      info = what
    )
    expect_tensor(y, c(1, 2) * 2, tolerance = 1e-6)
    expect_no_message(y <- fn$h(c(3, 4)))
    expect_tensor(y, c(3, 4) * 2, tolerance = 1e-6)
    grads <- native_grads(function(t) sum(fn$h(t)), c(1, 2))
    expect_values(grads[[1]], c(2, 2))
    # R at every call (3), after a trace that failed (a read of what no
    # check sees stops it before f runs).
    expect_gte(fn$counts$f, 3)
  }
})

test_that("the fallback message says why", {
  skip_if_no_backend()
  fn <- new_reading(value_reads[["as.numeric()"]])
  expect_snapshot(invisible(fn$h(1)))
})

test_that("a long Python error while tracing falls back, its message not read", {
  skip_if_no_backend()
  # Raised on Keras' placeholders only: two lines over R's `warning.length`
  # (1000), whose message reticulate 1.46 can't shorten (a C++ error).
  python <- reticulate::py_run_string(
    paste(
      "def fails_on_placeholders(x):",
      "    import keras",
      "    if isinstance(x, keras.KerasTensor):",
      "        raise ValueError('long ' * 200 + '\\nsecond line\\nthird')",
      "    return x",
      sep = "\n"
    ),
    local = TRUE
  )
  g <- op_grad(function(x) op_sum(python$fails_on_placeholders(x) * 3))
  expect_message(
    grad <- g(op_convert_to_tensor(c(1, 2))),
    "ValueError: long long",
    class = "customgrad_message_fallback"
  )
  expect_tensor(grad, c(3, 3))
})

test_that("strict tracing makes a fallback a classed error", {
  skip_if_no_backend()
  for (what in names(value_reads)) {
    fn <- new_reading(value_reads[[what]], trace = "strict")
    expect_error(fn$h(c(1, 2)), class = "customgrad_error_trace", info = what)
  }
  fn <- new_reading(value_reads[["as.numeric()"]], trace = "strict")
  expect_snapshot(fn$h(1), error = TRUE)
  # A function that traces is unaffected by strictness.
  strict <- new_counted_log1pexp(trace = "strict")
  expect_tensor(strict$h(0), log(2))
})

test_that("Keras random numbers drawn on a shape fall back; a dropout layer is replayed", {
  skip_if_no_backend()
  noisy <- op_custom_gradient(function(x) {
    tuple(op_add(x, random_uniform(op_shape(x))), function(upstream) upstream)
  })
  x <- op_zeros(4)
  expect_message(
    first <- as.array(noisy(x)),
    "Keras random numbers on no traced tensor",
    class = "customgrad_message_fallback"
  )
  second <- as.array(noisy(x))
  expect_false(isTRUE(all.equal(first, second)))
  expect_true(all(second >= 0 & second < 1))
  # A seed generator draws anew too; op_grad() falls back the same way.
  generator <- random_seed_generator(1)
  g <- op_grad(function(x) {
    op_sum(op_multiply(x, random_uniform(op_shape(x), seed = generator)))
  })
  expect_message(first <- as.array(g(x)), class = "customgrad_message_fallback")
  expect_false(isTRUE(all.equal(first, as.array(g(x)))))
  strict <- op_grad(
    function(x) op_sum(op_multiply(x, random_uniform(op_shape(x)))),
    trace = "strict"
  )
  expect_error(
    strict(x),
    "Keras random numbers",
    class = "customgrad_error_trace"
  )
  # Dropout draws from its traced input: traced once, a new mask each call.
  dropout <- layer_dropout(rate = 0.5)
  runs <- 0
  dropped <- op_grad(function(x) {
    runs <<- runs + 1
    op_sum(dropout(x, training = TRUE))
  })
  ones <- op_ones(64)
  expect_no_message(masks <- lapply(1:3, function(i) as.array(dropped(ones))))
  expect_identical(runs, 1)
  expect_false(isTRUE(all.equal(masks[[2]], masks[[3]])))
  expect_setequal(unique(unlist(masks)), c(0, 2))
})

test_that("Keras variables are read at every call; a changed R value stops the replays", {
  skip_if_no_backend()
  k <- 2
  v <- keras3::keras$Variable(3)
  # keras3's op_*() with the variable: R arithmetic between a tensor and a
  # Keras variable has two conflicting methods (untraced too).
  h <- op_custom_gradient(function(x) {
    tuple(op_multiply(x * k, v), function(upstream) {
      op_multiply(upstream * k, v)
    })
  })
  expect_tensor(h(1), 6)
  v$assign(5)
  expect_tensor(h(1), 10) # the trace reads v at every call
  # R's k is fixed in the trace: changed, R runs f from then on (captures.R).
  k <- 10
  expect_message(
    expect_tensor(h(1), 50),
    "`k` has changed",
    class = "customgrad_message_fallback"
  )
  expect_no_message(expect_tensor(h(c(1, 2)), c(50, 100)))
})

test_that("R arithmetic between a traced tensor and another kind falls back, also in R that Python runs", {
  skip_if_no_backend()
  # While op_compile() traces, `ct` is a Keras symbolic tensor; op_grad()'s
  # function, which reads it, is run by R inside Keras' shape inference on
  # the backend's placeholders: `x * ct` mixes the two kinds (on
  # TensorFlow, R warns "Incompatible methods", then fails). The trace
  # falls back to R, and the failure leaves Python's frames in order (it
  # had left TensorFlow's scratch graph the default graph).
  g <- op_compile(function(x, ct) op_grad(function(x) op_sum(x * ct))(x))
  x <- op_convert_to_tensor(c(1, 2))
  ct <- op_convert_to_tensor(c(3, 4))
  expect_message(
    expect_tensor(g(x, ct), c(3, 4)),
    if (config_backend() == "tensorflow") {
      "R arithmetic between a traced tensor"
    },
    class = "customgrad_message_fallback"
  )
  expect_tensor(g(x * 2, ct * 2), c(6, 8))
  # The session goes on: later gradients are numbers, also compiled.
  expect_tensor(op_grad(function(x) op_sum(x^2))(3), 6)
  expect_tensor(op_compile(op_grad(function(x) op_sum(x^3)))(2), 12)
})

test_that("a Keras variable assigned a traced tensor falls back, said in customgrad's words", {
  skip_if_no_backend()
  # The reason was Keras' own ten-line text ("A KerasTensor cannot be used
  # as input to a JAX function ...").
  v <- keras_variable(0, dtype = "float32")
  fc <- op_compile(function(x) {
    v$assign(op_add(v, op_sum(x)))
    op_sum(x)
  })
  x <- op_convert_to_tensor(c(4, 6), "float32")
  cnd <- expect_message(
    expect_tensor(fc(x), 10),
    class = "customgrad_message_fallback"
  )
  expect_match(conditionMessage(cnd), "variable's `$assign()`", fixed = TRUE)
  expect_no_match(conditionMessage(cnd), "KerasTensor")
  expect_tensor(fc(x), 10)
  expect_equal(as.vector(as.array(v)), 20) # R ran, and assigned, at each call
})

test_that("a keras3 op that fails on traced tensors is named in the fallback's reason", {
  skip_if_no_backend()
  # Keras' symbolic op_scan() can't take NULL for `ys`, which the eager one
  # takes (JAX's test_initial_style); the reason was Python's text alone.
  foo <- function(x) {
    op_scan(function(carry, z) list(op_sin(carry), NULL), x, length = 1L)[[1]]
  }
  x <- op_convert_to_tensor(3, "float32")
  cnd <- expect_message(
    expect_tensor(op_grad(foo)(x), cos(3), tolerance = 1e-6),
    class = "customgrad_message_fallback"
  )
  expect_match(
    conditionMessage(cnd),
    "keras3's `op_scan()` failed while tracing: AttributeError",
    fixed = TRUE
  )
  expect_match(
    conditionMessage(cnd),
    "Call that op with arguments Keras can trace",
    fixed = TRUE
  )
  # An error of customgrad's own Python, or of a function no op of keras3
  # has, names none.
  expect_identical(
    customgrad:::keras_op_failed(reticulate::py_eval("ValueError('x')")),
    ""
  )
})

test_that("what R computes from captured tensors while a compiler runs it is a constant of the trace", {
  skip_if_no_backend()
  # h is traced the first time a compiler running R (trace = FALSE) calls
  # it. On JAX, op_sum(y) was staged into that jax.jit's trace, and the
  # recording kept its tracer: every later call raised a raw
  # UnexpectedTracerError (JAX's test_initial_style_vmap_3, with a scan).
  # TensorFlow's graph makes op_sum(y) a graph tensor: a fallback to R.
  y <- op_convert_to_tensor(c(1, 2, 3), "float32")
  h <- op_custom_gradient(function(x) {
    s <- op_sum(y)
    tuple(x * s, function(g) g * s * 2)
  })
  x <- op_convert_to_tensor(c(0.5, 1, 2), "float32")
  compiled <- op_compile(function(x) h(x), trace = FALSE)
  if (config_backend() == "tensorflow") {
    expect_message(
      expect_tensor(compiled(x), c(3, 6, 12)),
      class = "customgrad_message_fallback"
    )
  } else {
    expect_no_message(expect_tensor(compiled(x), c(3, 6, 12)))
  }
  expect_tensor(h(x), c(3, 6, 12))
  expect_tensor(op_grad(function(x) op_sum(h(x)))(x), c(12, 12, 12))
  expect_tensor(compiled(x * 2), c(6, 12, 24))
})

test_that("a Keras variable's value used on no traced tensor falls back, read at every call", {
  skip_if_no_backend()
  # op_exp(v) ran once while tracing, and the replay kept its value after
  # v$assign(), on every backend.
  v <- keras3::keras$Variable(5)
  g <- op_grad(function(x) op_sum(op_multiply(x, op_exp(v))))
  expect_message(
    expect_tensor(g(c(1, 2)), rep(exp(5), 2), tolerance = 1e-5),
    "Keras variable's value on no traced tensor",
    class = "customgrad_message_fallback"
  )
  v$assign(0)
  expect_no_message(expect_tensor(g(c(1, 2)), c(1, 1)))
  scaled <- op_custom_gradient(function(x) {
    s <- op_exp(v)
    tuple(op_multiply(x, s), function(upstream) op_multiply(upstream, s))
  })
  h <- op_grad(function(x) op_sum(scaled(x)))
  if (keras3::config_backend() == "tensorflow") {
    # Run by R, f reads the variable under TensorFlow's custom gradient,
    # whose contract asks grad for its gradient.
    suppressMessages(expect_error(
      h(c(1, 2)),
      class = "customgrad_error_grad_variables"
    ))
  } else {
    expect_message(
      expect_tensor(h(c(1, 2)), c(1, 1)),
      class = "customgrad_message_fallback"
    )
    v$assign(1)
    expect_tensor(h(c(1, 2)), rep(exp(1), 2), tolerance = 1e-5)
  }
  # Read in R, the same.
  v$assign(0)
  read <- op_grad(function(x) op_sum(op_multiply(x, as.array(v) + 1)))
  expect_message(
    expect_tensor(read(c(1, 2)), c(1, 1)),
    class = "customgrad_message_fallback"
  )
  v$assign(2)
  expect_tensor(read(c(1, 2)), c(3, 3))
  strict <- op_grad(
    function(x) op_sum(op_multiply(x, op_exp(v))),
    trace = "strict"
  )
  expect_error(
    strict(c(1, 2)),
    "Keras variable",
    class = "customgrad_error_trace"
  )
})

test_that("captured Keras variables get no gradient through the function", {
  skip_if_no_backend()
  v <- keras3::keras$Variable(3)
  h <- op_custom_gradient(function(x) {
    tuple(op_multiply(x, v), function(upstream) op_multiply(upstream, v))
  })
  # TensorFlow hands the variables to the gradient: none for them, as on
  # JAX and PyTorch; the input's gradient is right.
  grads <- native_grads(function(t) sum(h(t)), c(1, 2))
  expect_values(grads[[1]], c(3, 3))
})

test_that("a function that keeps retracing warns once and keeps a capped cache", {
  skip_if_no_backend()
  withr::local_options(customgrad.max_traces = 2L)
  fn <- new_counted_log1pexp()
  fn$h(1)
  fn$h(c(1, 2))
  expect_warning(fn$h(c(1, 2, 3)), class = "customgrad_warning_retrace")
  expect_no_warning(fn$h(c(1, 2, 3, 4)))
  expect_identical(core_of(fn$h)$n_cached, 2L)
  # The oldest signature was dropped: calling it again traces again.
  before <- fn$counts$f
  expect_tensor(fn$h(1), log(1 + exp(1)), tolerance = 1e-6)
  expect_identical(fn$counts$f, before + 1)
})

test_that("an error in f while tracing reaches the user, and nothing is cached", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    rlang::abort("no good", class = "my_error")
  })
  expect_error(h(1), class = "my_error")
  expect_error(h(1), class = "my_error")
})

test_that("`trace` is checked", {
  expect_error(
    op_custom_gradient(identity, trace = "yes"),
    class = "customgrad_error_trace_arg"
  )
  expect_snapshot(op_custom_gradient(identity, trace = NA), error = TRUE)
})

test_that("model$fit() on every backend runs R only while tracing", {
  skip_if_no_backend()
  fn <- new_counted_log1pexp()
  model <- keras_model_sequential(input_shape = 3) |>
    layer_dense(4) |>
    layer_lambda(fn$h) |>
    layer_dense(1)
  model |> compile(optimizer = "sgd", loss = "mse")
  x <- matrix(seq_len(48) / 48, 16, 3)
  y <- matrix(seq_len(16) / 16, 16, 1)
  history <- model |>
    fit(x, y, epochs = 3, batch_size = 4, verbose = 0, shuffle = FALSE)
  # 12 steps; R ran for a handful of traces (building, training).
  expect_lte(fn$counts$f, 4)
  expect_identical(fn$counts$f, fn$counts$grad)
  loss <- history$metrics$loss
  expect_true(all(is.finite(loss)))
  expect_lt(loss[[3]], loss[[1]])
})
