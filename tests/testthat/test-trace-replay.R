# A replay computes what the keras3 op computed when R ran it: operations
# that keep a tensor argument as an attribute, static arguments Keras keeps
# as lists, and compiled replays that a backend can't trace. Each op is
# compared with the same call run eagerly, at a first call (which traces)
# and a second with other values (a replay), through op_compile() and
# op_grad(). Run on each backend.

# x and a second value of its signature, float32.
replay_inputs <- function() {
  list(
    op_convert_to_tensor(c(-1.5, -0.2, 0.3, 2), "float32"),
    op_convert_to_tensor(c(-0.7, 0.4, 1.1, -3), "float32")
  )
}

# `fn` of x compiled and differentiated, against `fn` run eagerly and its
# untraced gradient, on both `inputs` (two values of one signature). Where
# those fail (a backend that takes no tensor there: torch's elu() wants a
# number, or a tensor that needs no gradient) there is nothing to compare
# with.
expect_replays_as_eager <- function(fn, inputs = replay_inputs()) {
  compiled <- op_compile(fn)
  grad <- op_grad(function(x) op_sum(fn(x)))
  untraced <- op_grad(function(x) op_sum(fn(x)), trace = FALSE)
  for (x in inputs) {
    value <- try(as.array(fn(x)), silent = TRUE)
    if (!inherits(value, "try-error")) {
      expect_tensor(compiled(x), value, tolerance = 1e-6)
    }
    gradient <- try(as.array(untraced(x)), silent = TRUE)
    if (!inherits(gradient, "try-error")) {
      expect_tensor(grad(x), gradient, tolerance = 1e-6)
    }
  }
}

test_that("clip() with tensor bounds, one of them computed from x, replays", {
  skip_if_no_backend()
  low <- op_convert_to_tensor(-0.5, "float32")
  fn <- function(x) op_clip(x, low, op_add(op_multiply(x, 0), 0.5))
  expect_replays_as_eager(fn)
  # The gradient is 1 strictly inside the bounds, 0 outside.
  x <- replay_inputs()[[1]]
  expect_tensor(op_grad(function(x) op_sum(fn(x)))(x), c(0, 1, 1, 0))
})

test_that("ops that keep a tensor argument as an attribute replay with it", {
  skip_if_no_backend()
  # Each argument computed from x, so that it is symbolic while tracing.
  half <- function(x) op_add(op_multiply(op_sum(x), 0), 0.5)
  ops <- list(
    elu = function(x) op_elu(x, half(x)),
    celu = function(x) op_celu(x, half(x)),
    leaky_relu = function(x) op_leaky_relu(x, half(x)),
    hard_shrink = function(x) op_hard_shrink(x, half(x)),
    soft_shrink = function(x) op_soft_shrink(x, half(x)),
    threshold = function(x) op_threshold(x, half(x), op_multiply(half(x), 4)),
    squareplus = function(x) op_squareplus(x, half(x))
  )
  for (name in names(ops)) {
    expect_replays_as_eager(ops[[name]])
  }
})

test_that("a constant tensor argument replays in a compiled gradient", {
  skip_if_no_backend()
  # On TensorFlow the second call runs the replay as a tf.function, where
  # elu's Python test of `alpha` can't read a captured tensor: that
  # signature replays eagerly instead.
  alpha <- op_convert_to_tensor(0.7, "float32")
  fn <- function(x) op_elu(op_subtract(x, 0.5), alpha)
  expect_replays_as_eager(fn)
  grad <- op_grad(function(x) op_sum(fn(x)))
  x <- replay_inputs()[[2]]
  for (i in 1:3) {
    expect_tensor(
      grad(x),
      ifelse(as.array(x) > 0.5, 1, 0.7 * exp(as.array(x) - 0.5)),
      tolerance = 1e-6
    )
  }
})

test_that("an axis Keras keeps as a list replays on every backend", {
  skip_if_no_backend()
  m <- op_convert_to_tensor(matrix(c(1, -2, 3, 4, 0.5, -1), 2), "float32")
  norm <- function(x) op_norm(x, axis = 2L)
  expect_tensor(op_compile(norm)(m), as.array(norm(m)), tolerance = 1e-6)
  expect_tensor(
    op_grad(function(x) op_sum(norm(x)))(m),
    as.array(m) / sqrt(rowSums(as.array(m)^2)),
    tolerance = 1e-6
  )
  median_of <- function(x) op_quantile(x, 0.5, axis = 2L)
  expect_tensor(op_compile(median_of)(m), as.array(median_of(m)))
  expect_tensor(
    op_grad(function(x) op_sum(median_of(x)))(m),
    as.array(op_grad(function(x) op_sum(median_of(x)), trace = FALSE)(m))
  )
})

test_that("ops whose Keras operation computes otherwise replay as the op", {
  skip_if_no_backend()
  # Keras records these with an operation whose call() is not the function
  # the user called (conv_transpose() swapped its paddings, histogram()
  # failed, gaussian_blur() read a channels-last image as channels first,
  # view_as_complex() failed on TensorFlow): the replay runs the function.
  set.seed(3)
  images <- lapply(1:2, function(i) {
    op_convert_to_tensor(array(runif(2 * 6 * 6 * 3), c(2, 6, 6, 3)), "float32")
  })
  kernel <- op_convert_to_tensor(array(runif(54), c(3, 3, 2, 3)), "float32")
  expect_replays_as_eager(
    function(x) op_conv_transpose(x, kernel, strides = 2L),
    images
  )
  expect_replays_as_eager(function(x) op_image_gaussian_blur(x), images)
  pairs <- lapply(1:2, function(i) {
    op_convert_to_tensor(matrix(runif(6), 3, 2), "float32")
  })
  # (Values only: TensorFlow warns at each gradient through complex parts.)
  parts <- function(x) {
    op_imag(op_view_as_complex(x)) * op_real(op_view_as_complex(x))
  }
  for (x in pairs) {
    expect_tensor(op_compile(parts)(x), as.array(parts(x)))
  }
  counts <- function(x) op_histogram(x, bins = 4L)[[1]]
  values <- op_convert_to_tensor(c(0.1, 0.2, 0.25, 0.7, 0.9, 1), "float32")
  expect_tensor(op_compile(counts)(values), c(3, 0, 1, 2))
  expect_tensor(op_compile(counts)(values * 2), c(3, 0, 1, 2))
})

test_that("ops holding R functions run in R, with the numbers R gives", {
  skip_if_no_backend()
  # op_cond()'s branches read x, a symbolic tensor while tracing: a replay
  # calling them gave a symbolic tensor or a raw error.
  cond <- function(x) op_cond(op_sum(x) > 0, \() x * 2, \() x * 3)
  map <- function(x) op_map(x, \(e) e * 2)
  loop <- function(x) op_fori_loop(0L, 3L, \(i, a) a * 2, x)
  x <- replay_inputs()
  for (fn in list(cond, map, loop)) {
    compiled <- op_compile(fn)
    expect_message(
      expect_tensor(compiled(x[[1]]), as.array(fn(x[[1]]))),
      class = "customgrad_message_fallback"
    )
    expect_tensor(compiled(x[[2]]), as.array(fn(x[[2]])))
  }
  expect_message(
    grad <- op_grad(function(x) op_sum(cond(x)))(x[[2]]),
    class = "customgrad_message_fallback"
  )
  expect_tensor(grad, c(3, 3, 3, 3))
})

# (Not on JAX: jnp.nonzero() can't run under jax.jit, op_compile()'s
# replay, the backend's own limit; not registered there, as CI fails on a
# skip.)
if (backend_name() != "jax") {
  test_that("an op whose backend returns another structure than Keras records runs in R", {
    skip_if_no_backend()
    # PyTorch's nonzero() is one tensor where Keras records a tuple, and
    # keras3's op_nonzero() iterates over it: a trace would give another
    # shape. The others replay.
    x <- op_convert_to_tensor(matrix(c(0L, 1L, 1L, 0L, 1L, 1L), 2), "int32")
    compiled <- op_compile(op_nonzero)
    if (keras3::config_backend() == "torch") {
      expect_message(
        got <- compiled(x),
        "other outputs than torch gives it",
        class = "customgrad_message_fallback"
      )
    } else {
      expect_no_message(got <- compiled(x))
    }
    expect_identical(as.array(got), as.array(op_nonzero(x)))
  })
}

test_that("op_is_tensor() traced is not traced", {
  skip_if_no_backend()
  # FALSE for the symbolic tensors R traces with.
  x <- op_convert_to_tensor(c(0.5, 2))
  expect_message(
    expect_identical(as.logical(op_compile(op_is_tensor)(x)), TRUE),
    "op_is_tensor",
    class = "customgrad_message_fallback"
  )
})
