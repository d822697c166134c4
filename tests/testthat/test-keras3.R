# customgrad in a keras3 user's session: attach orders, keras3's model API,
# keras3's dtypes, and keras3's functions inside f and grad.

# --- Attach orders (each in a fresh R process on this backend) ----------------

test_that("library(keras3) then library(customgrad): customgrad's op_custom_gradient", {
  skip_if_no_callr()
  skip_if_no_backend()
  result <- run_in_fresh_r(
    attach_and_differentiate,
    list(packages = c("keras3", "customgrad"))
  )
  expect_fresh_session_ok(result)
})

test_that("library(customgrad) then library(keras3): keras3 doesn't mask it", {
  skip_if_no_callr()
  skip_if_no_backend()
  result <- run_in_fresh_r(
    attach_and_differentiate,
    list(packages = c("customgrad", "keras3"))
  )
  expect_fresh_session_ok(result)
})

test_that("library(customgrad) alone attaches keras3 under it", {
  skip_if_no_callr()
  skip_if_no_backend()
  result <- run_in_fresh_r(
    attach_and_differentiate,
    list(packages = "customgrad")
  )
  expect_fresh_session_ok(result)
})

# --- Keras variables next to tensors ------------------------------------------

test_that("keras3 code mixing variables and tensors gives the same with customgrad", {
  skip_if_no_callr()
  skip_if_no_backend()
  alone <- run_in_fresh_r(
    keras3_mixing_variables,
    list(attach_customgrad = FALSE),
    same_python = TRUE
  )
  attached <- run_in_fresh_r(
    keras3_mixing_variables,
    list(attach_customgrad = TRUE),
    same_python = TRUE
  )
  # No "Incompatible methods" on R < 4.3, with customgrad or without.
  expect_identical(alone$warnings, character())
  expect_identical(attached$warnings, character())
  expect_equal(attached, alone)
  # Real values: the constraint keeps the dense layer's weights >= 0, and
  # the eager operations give R's results.
  expect_true(all(attached$weights[[1]] >= 0))
  expect_true(all(attached$weights[[2]] >= 0))
  expect_true(all(is.finite(attached$loss)))
  v <- c(-1, 2, -3)
  t <- c(2, 2, 2)
  expect_equal(
    attached$eager,
    list(v * t, t - v, v + 1, 2 / v, v > t, t == v, -v, v * v),
    tolerance = 1e-6
  )
  if (config_backend() != "tensorflow") {
    expect_identical(attached$symbolic_shape, 3L)
  }
})

test_that("a Keras variable and a tensor find one and the same method", {
  skip_if_no_backend()
  v <- keras$Variable(c(-1, 2, -3), dtype = "float32")
  x <- op_convert_to_tensor(c(2, 2, 2), dtype = "float32")
  if (config_backend() != "tensorflow") {
    for (generic in c("Ops", "Math")) {
      expect_identical(
        s3_method_of(generic, v),
        s3_method_of(generic, x),
        label = sprintf("%s of a variable", generic)
      )
    }
  }
  expect_no_warning(product <- v * x)
  expect_equal(as.vector(as.array(product)), c(-2, 4, -6))
  expect_equal(as.vector(as.array(abs(v))), c(1, 2, 3))
  expect_equal(as.vector(as.array(exp(v))), exp(c(-1, 2, -3)), tolerance = 1e-6)
  # Inside a traced function (jax.jit, tf.function, torch eager), the
  # variable meets a tracer.
  f <- function(t) v * t + v
  if (config_backend() == "jax") {
    f <- reticulate::import("jax")$jit(f)
  }
  expect_equal(as.vector(as.array(f(x))), c(-3, 6, -9))
})

# --- keras3's model API -------------------------------------------------------

test_that("a sequential model with a custom-gradient Lambda layer trains", {
  skip_if_no_backend()
  set.seed(1)
  keras3::set_random_seed(1)
  x <- matrix(runif(64 * 3), 64, 3)
  y <- x %*% c(1, -2, 0.5) + 0.1
  log1pexp <- new_log1pexp()
  model <- dense_lambda_dense(log1pexp, units = 8)
  model |> compile(optimizer = optimizer_sgd(0.05), loss = "mse")
  history <- model |> fit(x, y, epochs = 5, batch_size = 16, verbose = 0)
  loss <- history$metrics$loss
  expect_length(loss, 5)
  expect_true(all(is.finite(loss)))
  expect_lt(loss[[5]], loss[[1]])
  # The layer computes log(1 + exp(.)) of the dense layer's output.
  below <- keras_model(model$inputs, model$layers[[2]]$output)
  dense <- keras_model(model$inputs, model$layers[[1]]$output)
  expect_equal(
    as.array(below(x[1:4, ])),
    log1p(exp(as.array(dense(x[1:4, ])))),
    tolerance = 1e-5
  )
})

test_that("a zero custom gradient stops training below it, not above it", {
  skip_if_no_backend()
  set.seed(2)
  keras3::set_random_seed(2)
  x <- matrix(runif(32 * 3), 32, 3)
  y <- x %*% c(1, -2, 0.5) + 0.1
  stop_gradient <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) op_zeros_like(upstream))
  })
  model <- dense_lambda_dense(stop_gradient, units = 4)
  model |> compile(optimizer = optimizer_sgd(0.1), loss = "mse")
  below_before <- get_weights(get_layer(model, "below"))
  above_before <- get_weights(get_layer(model, "above"))
  history <- model |> fit(x, y, epochs = 3, batch_size = 8, verbose = 0)
  expect_true(all(is.finite(history$metrics$loss)))
  expect_identical(get_weights(get_layer(model, "below")), below_before)
  above_after <- get_weights(get_layer(model, "above"))
  expect_gt(max(abs(above_after[[1]] - above_before[[1]])), 1e-3)
  expect_gt(max(abs(above_after[[2]] - above_before[[2]])), 1e-3)
})

test_that("a gradient scaled by 2 doubles the step below it", {
  skip_if_no_backend()
  set.seed(3)
  keras3::set_random_seed(3)
  x <- matrix(runif(16 * 3), 16, 3)
  y <- x %*% c(1, -2, 0.5)
  plain <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) upstream)
  })
  doubled <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) upstream * 2)
  })
  # One full-batch step of SGD from the same weights.
  one_step <- function(middle, weights = NULL) {
    model <- dense_lambda_dense(middle, units = 4)
    if (!is.null(weights)) {
      set_weights(model, weights)
    }
    before <- get_weights(model)
    model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
    model |>
      fit(x, y, epochs = 1, batch_size = 16, shuffle = FALSE, verbose = 0)
    after <- get_weights(model)
    list(before = before, step = Map(`-`, after, before))
  }
  a <- one_step(plain)
  b <- one_step(doubled, a$before)
  expect_equal(b$before, a$before)
  # below: kernel and bias move twice as far; above: the same
  expect_gt(max(abs(a$step[[1]])), 1e-5)
  expect_equal(b$step[[1]], 2 * a$step[[1]], tolerance = 1e-4)
  expect_equal(b$step[[2]], 2 * a$step[[2]], tolerance = 1e-4)
  expect_equal(b$step[[3]], a$step[[3]], tolerance = 1e-4)
  expect_equal(b$step[[4]], a$step[[4]], tolerance = 1e-4)
})

# --- dtypes -------------------------------------------------------------------

test_that("R inputs get the dtype keras3's op_convert_to_tensor() gives them", {
  skip_if_no_backend()
  identity <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) upstream)
  })
  expect_identical(
    op_dtype(identity(c(1, 2))),
    op_dtype(op_convert_to_tensor(c(1, 2)))
  )
  # R numbers get the dtype of R vectors (keras3 alone makes them float32),
  # so that numbers and vectors passed together mix on TensorFlow.
  expect_identical(
    op_dtype(identity(3)),
    op_dtype(op_convert_to_tensor(c(1, 2)))
  )
  expect_identical(
    op_dtype(identity(1:2)),
    op_dtype(op_convert_to_tensor(1:2))
  )
  expect_equal(as.vector(as.array(identity(c(1, 2)))), c(1, 2))
})

test_that("results mix with keras3's tensors in op_*() and R arithmetic", {
  skip_if_no_backend()
  identity <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) upstream)
  })
  reference <- op_convert_to_tensor(c(1, 2))
  y <- identity(c(1, 2))
  expect_equal(as.vector(as.array(op_add(y, reference))), c(2, 4))
  expect_equal(as.vector(as.array(op_multiply(reference, y))), c(1, 4))
  # R's operators: tensorflow R's methods on TensorFlow (no dtype promotion)
  expect_equal(as.vector(as.array(y + reference)), c(2, 4))
  expect_equal(as.vector(as.array(reference * y)), c(1, 4))
})

# --- keras3's functions inside f and grad -------------------------------------

test_that("keras3's op_*() and R arithmetic work inside f and grad", {
  skip_if_no_backend()
  # f(x) = sum(x^2 * sin(x)), f'(x) = 2x sin(x) + x^2 cos(x)
  h <- op_custom_gradient(function(x) {
    s <- op_sin(x)
    value <- op_sum(x^2 * s)
    grad <- function(upstream) {
      upstream * (2 * x * s + op_square(x) * op_cos(x))
    }
    tuple(value, grad)
  })
  x <- c(-1, 0.5, 2)
  expect_equal(as.vector(as.array(h(x))), sum(x^2 * sin(x)), tolerance = 1e-6)
  expect_equal(
    as.vector(as.array(op_grad(h)(x))),
    2 * x * sin(x) + x^2 * cos(x),
    tolerance = 1e-5
  )
})

test_that("f and grad may return tuple() or list(), in any mix", {
  skip_if_no_backend()
  # f(x, y) = sum(x * y + exp(x)): df/dx = y + exp(x), df/dy = x
  make <- function(outer, inner) {
    op_custom_gradient(function(x, y) {
      grad <- function(..., upstream = NULL) {
        upstream <- upstream %||% ..1
        inner(upstream * (y + op_exp(x)), upstream * x)
      }
      outer(op_sum(x * y + exp(x)), grad)
    })
  }
  x <- c(0.5, -1, 2)
  y <- c(3, 0.25, -2)
  for (outer in c("tuple", "list")) {
    for (inner in c("tuple", "list")) {
      h <- make(match.fun(outer), match.fun(inner))
      label <- sprintf("f returns %s(), grad returns %s()", outer, inner)
      expect_equal(
        as.vector(as.array(h(x, y))),
        sum(x * y + exp(x)),
        tolerance = 1e-6,
        label = label
      )
      g <- op_grad(h, wrt = 1:2)(x, y)
      expect_length(g, 2)
      expect_equal(
        as.vector(as.array(g[[1]])),
        y + exp(x),
        tolerance = 1e-5,
        label = label
      )
      expect_equal(
        as.vector(as.array(g[[2]])),
        x,
        tolerance = 1e-5,
        label = label
      )
    }
  }
})

test_that("a single input's gradient may come bare, in tuple() or in list()", {
  skip_if_no_backend()
  wrap <- list(bare = function(g) g, tuple = tuple, list = list)
  for (name in names(wrap)) {
    h <- op_custom_gradient(function(x) {
      tuple(op_tanh(x), function(upstream) {
        wrap[[name]](upstream * (1 - op_tanh(x)^2))
      })
    })
    x <- c(-0.5, 0, 1.5)
    expect_equal(
      as.vector(as.array(op_grad(function(x) op_sum(h(x)))(x))),
      1 - tanh(x)^2,
      tolerance = 1e-5,
      label = name
    )
  }
})
