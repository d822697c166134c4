# Custom gradients under vectorising maps, per-example gradients and
# forward mode. `sq`'s rule is deliberately not autodiff's (3x, not 2x), so
# a dropped rule shows.

sq <- function(trace = TRUE) {
  op_custom_gradient(
    function(x) tuple(x * x, function(upstream) upstream * 3 * x),
    trace = trace
  )
}

xs <- c(1, 2, -0.5)

test_that("op_vectorized_map() keeps the custom gradient (refused on TensorFlow)", {
  skip_if_no_backend()
  h <- sq()
  x <- op_convert_to_tensor(xs, "float32")
  mapped <- function(x) op_sum(op_vectorized_map(x, function(r) op_sum(h(r))))
  # The value is right everywhere.
  expect_equal(as.numeric(mapped(x)), sum(xs^2), tolerance = 1e-6)
  for (g in list(op_grad(mapped), op_compile(op_grad(mapped)))) {
    if (config_backend() == "tensorflow") {
      expect_error(
        g(x),
        "vectorized_map.*can't use a custom gradient",
        class = "customgrad_error_transform"
      )
    } else {
      expect_equal(as.numeric(g(x)), 3 * xs, tolerance = 1e-6)
    }
  }
})

test_that("per-example gradients use the custom gradient (refused on TensorFlow)", {
  skip_if_no_backend()
  h <- sq()
  x <- op_convert_to_tensor(xs, "float32")
  w <- op_convert_to_tensor(2, "float32")
  per_example <- function() {
    op_vectorized_map(x, function(xi) {
      op_grad(function(w) op_sum(h(xi * w)))(w)
    })
  }
  if (config_backend() == "tensorflow") {
    expect_error(per_example(), "vectorized_map.*can't use a custom gradient")
  } else {
    # d/dw of (xi w)^2 by the rule: 3 (xi w) xi
    expect_equal(as.numeric(per_example()), 3 * xs * xs * 2, tolerance = 1e-6)
  }
})

test_that("forward mode through a custom gradient is refused, naming reverse mode", {
  skip_if_no_backend()
  h <- sq()
  x <- op_convert_to_tensor(xs, "float32")
  err <- expect_error(
    keras3::keras$ops$jvp(h, tuple(x), tuple(x)),
    class = if (config_backend() != "tensorflow") "customgrad_error_transform"
  )
  expect_match(conditionMessage(err), "forward mode|forward-mode|reverse")
})

test_that("a function R runs at every call is not batched by vmap", {
  skip_if_no_backend()
  h <- sq(trace = FALSE)
  x <- op_convert_to_tensor(xs, "float32")
  if (config_backend() == "tensorflow") {
    # pfor runs R on graph tensors, as any tf.function does: the value is
    # right, and the gradient refused.
    expect_equal(
      as.numeric(op_vectorized_map(x, function(r) h(r))),
      xs^2,
      tolerance = 1e-6
    )
    expect_error(
      op_grad(function(x) op_sum(op_vectorized_map(x, function(r) h(r))))(x),
      class = "customgrad_error_transform"
    )
    return()
  }
  # The error is customgrad_error_transform where h() raises it; R's own
  # function given to op_vectorized_map() hands it on as a Python error.
  expect_error(
    op_vectorized_map(x, function(r) h(r)),
    "R runs at every call can't be batched"
  )
})

test_that("inside fit(), op_vectorized_map() keeps the rule (refused on TensorFlow)", {
  skip_if_no_backend()
  h <- sq()
  inputs <- keras_input(shape = 4)
  outputs <- inputs |>
    layer_dense(3, use_bias = FALSE, kernel_initializer = "ones") |>
    layer_lambda(function(z) op_vectorized_map(z, function(r) h(r))) |>
    layer_lambda(function(s) op_sum(s, axis = 2, keepdims = TRUE))
  model <- keras_model(inputs, outputs)
  model |>
    compile(
      optimizer = optimizer_sgd(learning_rate = 0.1),
      loss = function(y_true, y_pred) op_mean(y_pred)
    )
  train <- function() {
    fit(model, matrix(1, 1, 4), matrix(0), epochs = 1, verbose = 0)
  }
  if (config_backend() == "tensorflow") {
    expect_error(train(), "vectorized_map.*can't use a custom gradient")
    return()
  }
  train()
  # z = 4 for each unit; the rule's dz = 3 z = 12 (autodiff's: 8), so each
  # kernel entry steps by 0.1 * 12: 1 - 1.2.
  expect_equal(
    as.vector(get_weights(model)[[1]]),
    rep(-0.2, 12),
    tolerance = 1e-5
  )
})
