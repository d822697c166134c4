# The ready-made ops: values and gradients against their formulas, and in a
# model, that each trains and that its gradient visibly acted.

# d/dx sum(op(x) * w): the op's gradient for the upstream gradient w.
grad_for_upstream <- function(op, x, w) {
  w <- op_convert_to_tensor(w, "float32")
  op_grad(\(x) op_sum(op(x) * w))(op_convert_to_tensor(x, "float32"))
}

test_that("reversal, scaling and clipping pass the value and change the gradient as documented", {
  skip_if_no_backend()
  x <- c(-2, 0.5, 3)
  w <- c(4, -0.5, 2)
  expect_tensor(op_gradient_reversal(op_convert_to_tensor(x, "float32")), x)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_reversal(x, 0.5), x, w),
    -0.5 * w
  )
  expect_tensor(grad_for_upstream(op_gradient_reversal, x, w), -w)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_scale(x, 0.1), x, w),
    0.1 * w
  )
  expect_tensor(grad_for_upstream(\(x) op_gradient_scale(x, 0), x, w), 0 * w)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_clip_value(x, -1, 1), x, w),
    pmin(pmax(w, -1), 1)
  )
  expect_tensor(
    op_gradient_clip_value(op_convert_to_tensor(x, "float32"), -1, 1),
    x
  )
  norm <- sqrt(sum(w^2))
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_clip_norm(x, 1), x, w),
    w / norm,
    tolerance = 1e-6
  )
  # Within the bound, the gradient is left as it is.
  expect_tensor(grad_for_upstream(\(x) op_gradient_clip_norm(x, 10), x, w), w)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_clip_norm(x, 1), x, 0 * w),
    0 * w
  )
})

test_that("the straight-through estimator steps forward and passes the gradient back", {
  skip_if_no_backend()
  x <- c(-1.2, 0.3, 0.7, 2.5)
  w <- c(1, 2, 3, 4)
  tensor <- op_convert_to_tensor(x, "float32")
  expect_tensor(op_straight_through(tensor), sign(x))
  expect_tensor(op_straight_through(tensor, "round"), round(x))
  expect_tensor(op_straight_through(tensor, \(x) op_floor(x) * 2), floor(x) * 2)
  for (f in list("sign", "round", "floor")) {
    expect_tensor(grad_for_upstream(\(x) op_straight_through(x, f), x, w), w)
  }
  # The true derivative of the step is 0: that is what it replaces.
  expect_tensor(grad_for_upstream(op_round, x, w), 0 * w)
})

test_that("op_log1pexp() is finite where the naive formula overflows, and passes gradcheck()", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(-100, -2, 0, 3, 100), "float32")
  expect_tensor(
    op_log1pexp(x),
    log1p(exp(c(-100, -2, 0, 3, 100))),
    tolerance = 1e-6
  )
  expect_tensor(
    op_grad(\(x) op_sum(op_log1pexp(x)))(x),
    plogis(c(-100, -2, 0, 3, 100))
  )
  expect_identical(as.numeric(op_grad(op_log1pexp)(100)), 1)
  result <- gradcheck(op_log1pexp, c(-30, -2, 0, 0.5, 4, 30), error = TRUE)
  expect_true(attr(result, "pass"))
  expect_identical(result$elements, 6L)
})

test_that("bad parameters are classed errors naming the argument", {
  skip_if_no_backend()
  expect_snapshot(error = TRUE, {
    op_gradient_reversal(1, lambda = "a")
    op_gradient_clip_value(1, min = 1, max = -1)
    op_gradient_clip_norm(1, max_norm = 0)
    op_straight_through(1, f = "no_such_op")
  })
  expect_error(
    op_gradient_scale(1, NA),
    class = "customgrad_error_bad_argument"
  )
  expect_error(
    layer_gradient_clip_norm(max_norm = -1),
    class = "customgrad_error_bad_argument"
  )
})

test_that("each op made once per parameters: a loop traces once", {
  skip_if_no_backend()
  before <- length(customgrad:::the$ready_made)
  for (i in 1:3) {
    op_gradient_reversal(c(1, 2), lambda = 0.25)
  }
  expect_identical(length(customgrad:::the$ready_made), before + 1L)
})

# --- In a model ----------------------------------------------------------

# The change of the lower dense layer's kernel in one SGD step over the
# whole data, for a model with `middle` between the dense layers.
one_step_change <- function(middle, data) {
  model <- three_layer_model(middle)
  before <- get_weights(model)[[1]]
  model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  model |>
    fit(data$x, data$y, epochs = 1, batch_size = nrow(data$x), verbose = 0)
  get_weights(model)[[1]] - before
}

plain <- function(x) layer_lambda(x, \(x) x)

test_that("in a model, reversal moves the lower layer against plain gradient descent", {
  skip_if_no_backend()
  data <- regression_data()
  plain_step <- one_step_change(plain, data)
  reversed_step <- one_step_change(
    \(x) layer_gradient_reversal(x, lambda = 0.5),
    data
  )
  expect_gt(max(abs(plain_step)), 0)
  expect_equal(reversed_step, -0.5 * plain_step, tolerance = 1e-5)
  scaled_step <- one_step_change(\(x) layer_gradient_scale(x, 0.1), data)
  expect_equal(scaled_step, 0.1 * plain_step, tolerance = 1e-5)
  # And the model still trains: the head fits what the reversed layer gives.
  losses <- fit_losses(
    three_layer_model(\(x) layer_gradient_reversal(x, lambda = 0.01)),
    data,
    epochs = 5
  )
  expect_lt(losses[[5]], losses[[1]])
})

test_that("a Keras variable as lambda: the reversal reads its current value", {
  skip_if_no_backend()
  x <- c(-2, 0.5, 3)
  w <- c(4, -0.5, 2)
  lambda <- keras_variable(0.5, trainable = FALSE)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_reversal(x, lambda), x, w),
    -0.5 * w
  )
  lambda$assign(2)
  expect_tensor(
    grad_for_upstream(\(x) op_gradient_reversal(x, lambda), x, w),
    -2 * w
  )
  expect_tensor(
    op_gradient_reversal(op_convert_to_tensor(x, "float32"), lambda),
    x
  )
})

test_that("a layer's lambda variable, assigned by a callback, sets each epoch's step", {
  skip_if_no_backend()
  data <- regression_data()
  lambda <- keras_variable(0, trainable = FALSE)
  model <- three_layer_model(\(x) {
    layer_gradient_reversal(x, lambda = lambda, name = "reversal")
  })
  reversal <- get_layer(model, "reversal")
  expect_length(reversal$non_trainable_weights, 1L)
  expect_length(model$trainable_weights, 4L)
  model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
  kernels <- list(get_weights(model)[[1]])
  schedule <- callback_lambda(
    on_epoch_begin = \(epoch, logs) lambda$assign(c(0, 1, 0, 0.5)[epoch]),
    on_epoch_end = \(epoch, logs) {
      kernels[[epoch + 1]] <<- get_weights(model)[[1]]
    }
  )
  model |>
    fit(
      data$x,
      data$y,
      epochs = 4,
      batch_size = nrow(data$x),
      shuffle = FALSE,
      callbacks = list(schedule),
      verbose = 0
    )
  steps <- lapply(2:5, \(i) kernels[[i]] - kernels[[i - 1]])
  # lambda 0: the layer below doesn't move; 1 and 0.5: it does.
  expect_identical(max(abs(steps[[1]])), 0)
  expect_identical(max(abs(steps[[3]])), 0)
  expect_gt(max(abs(steps[[2]])), 0)
  expect_gt(max(abs(steps[[4]])), 0)
  expect_equal(as.numeric(lambda$numpy()), 0.5)
})

test_that("a layer's lambda variable is saved with the model and loads as a weight", {
  skip_if_no_backend()
  data <- regression_data()
  lambda <- keras_variable(0.25, trainable = FALSE)
  model <- three_layer_model(\(x) {
    layer_gradient_reversal(x, lambda = lambda, name = "reversal")
  })
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  loaded <- load_model(path)
  reversal <- get_layer(loaded, "reversal")
  expect_length(reversal$non_trainable_weights, 1L)
  expect_equal(as.numeric(reversal$non_trainable_weights[[1]]$numpy()), 0.25)
  expect_equal(
    predict(loaded, data$x, verbose = 0),
    predict(model, data$x, verbose = 0)
  )
  # Without R, the saved traces take the variable too.
  out <- run_plain_python(c(
    "import numpy as np, keras",
    "import customgrad.layers",
    sprintf("model = keras.saving.load_model('%s')", path),
    "layer = model.get_layer('reversal')",
    "print('lambda', float(layer.non_trainable_weights[0].numpy()))",
    "x = np.ones((2, 3), 'float32')",
    "print('prediction', float(model.predict(x, verbose=0)[0, 0]))"
  ))
  expect_true("lambda 0.25" %in% out)
  prediction <- as.numeric(sub(
    "^prediction ",
    "",
    grep("^prediction ", out, value = TRUE)
  ))
  expect_equal(
    prediction,
    predict(model, matrix(1, 2, 3), verbose = 0)[1, 1],
    tolerance = 1e-5
  )
})

test_that("in a model, clipping the backward pass shrinks the lower layer's step", {
  skip_if_no_backend()
  data <- regression_data()
  data$y <- data$y * 100 # large errors: large upstream gradients
  plain_step <- one_step_change(plain, data)
  for (middle in list(
    \(x) layer_gradient_clip_value(x, -0.01, 0.01),
    \(x) layer_gradient_clip_norm(x, 0.01)
  )) {
    clipped_step <- one_step_change(middle, data)
    expect_gt(max(abs(clipped_step)), 0)
    expect_lt(max(abs(clipped_step)), max(abs(plain_step)) / 10)
    losses <- fit_losses(three_layer_model(middle), data, epochs = 4)
    expect_lt(losses[[4]], losses[[1]])
  }
})

test_that("in a model, the straight-through layer trains where the plain step can't", {
  skip_if_no_backend()
  data <- regression_data()
  through <- one_step_change(\(x) layer_straight_through(x, "sign"), data)
  stepped <- one_step_change(\(x) layer_lambda(x, op_sign), data)
  expect_gt(max(abs(through)), 0)
  expect_identical(max(abs(stepped)), 0)
  losses <- fit_losses(
    three_layer_model(\(x) layer_straight_through(x, "round")),
    data,
    epochs = 4
  )
  expect_lt(losses[[4]], losses[[1]])
})

test_that("in a model, op_log1pexp() trains as softplus does", {
  skip_if_no_backend()
  data <- regression_data()
  losses <- fit_losses(
    three_layer_model(\(x) layer_lambda(x, op_log1pexp)),
    data
  )
  reference <- fit_losses(
    three_layer_model(\(x) layer_activation(x, "softplus")),
    data
  )
  expect_equal(losses, reference, tolerance = 1e-5)
  expect_lt(losses[[3]], losses[[1]])
})

test_that("errors of the ready-made ops name the op the caller called", {
  skip_if_no_backend()
  err <- expect_error(op_log1pexp(1i), class = "customgrad_error_input")
  expect_equal(conditionCall(err), quote(op_log1pexp(1i)))
  err <- expect_error(
    op_gradient_reversal(c(1, NA)),
    class = "customgrad_error_na"
  )
  expect_equal(conditionCall(err), quote(op_gradient_reversal(c(1, NA))))
  err <- expect_error(
    op_gradient_clip_value(1, -1),
    class = "customgrad_error_bad_argument"
  )
  expect_equal(conditionCall(err), quote(op_gradient_clip_value(1, -1)))
  expect_snapshot(error = TRUE, {
    op_gradient_scale(1i, 2)
    op_gradient_clip_value(1, -1)
    op_gradient_clip_norm(1)
    layer_gradient_scale()
  })
})
