# Keras objects: variables as inputs, symbolic tensors, and model$fit().

test_that("a Keras variable works as an input", {
  skip_if_no_backend()
  keras <- reticulate::import("keras", convert = FALSE)
  h <- op_custom_gradient(function(x) {
    tuple(x^2, function(upstream) upstream * 2 * x)
  })
  v <- keras$Variable(c(1, 3))
  expect_tensor(h(v), c(1, 9))
  grad <- switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      tape <- tf$GradientTape()
      tape$`__enter__`()
      y <- tf$reduce_sum(h(v))
      tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, v$value)
    },
    jax = reticulate::import("jax")$grad(function(w) sum(h(w)))(v$value),
    torch = {
      sum(h(v))$backward()
      v$value$grad
    }
  )
  expect_values(as.array(grad), c(2, 6))
})

test_that("symbolic Keras tensors get the output's shape", {
  skip_if_no_backend()
  keras <- reticulate::import("keras", convert = FALSE)
  h <- op_custom_gradient(function(x) {
    tuple(list(x * 2, sum(x)), function(upstream) upstream[[1]] * 2)
  })
  out <- h(keras$KerasTensor(list(NULL, 3L)))
  expect_true(inherits(
    out[[1]],
    "keras.src.backend.common.keras_tensor.KerasTensor"
  ))
  expect_identical(reticulate::py_to_r(out[[1]]$shape), list(NULL, 3L))
  expect_identical(reticulate::py_to_r(out[[2]]$shape), list())
})

# A Dense layer followed by a custom-gradient layer, trained a few steps of
# SGD without shuffling: weights are deterministic given the gradient.
train_weights <- function(custom = NULL) {
  keras <- reticulate::import("keras", convert = FALSE)
  keras$utils$set_random_seed(1L)
  layers <- list(
    keras$Input(shape = list(2L)),
    keras$layers$Dense(
      1L,
      kernel_initializer = "ones",
      bias_initializer = "zeros"
    )
  )
  if (!is.null(custom)) {
    layers <- c(layers, keras$layers$Lambda(function(x) custom(x)))
  }
  model <- keras$Sequential(layers)
  model$compile(
    optimizer = keras$optimizers$SGD(learning_rate = 0.1),
    loss = "mse"
  )
  x <- reticulate::np_array(
    matrix(c(1, 2, 3, 4, 0.5, 1, -1, 2), 4),
    dtype = "float32"
  )
  y <- reticulate::np_array(matrix(c(1, 0, 2, 1), 4), dtype = "float32")
  model$fit(x, y, epochs = 3L, batch_size = 2L, shuffle = FALSE, verbose = 0L)
  as.array(model$layers[[0]]$kernel)
}

test_that("model$fit() trains through the custom gradient", {
  skip_if_no_backend()
  calls <- 0
  identity_grad <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) {
      calls <<- calls + 1
      upstream
    })
  })
  block_grad <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) upstream * 0)
  })
  plain <- train_weights()
  expect_false(isTRUE(all.equal(plain, matrix(1, 2, 1))))
  expect_equal(train_weights(identity_grad), plain, tolerance = 1e-6)
  expect_equal(train_weights(block_grad), matrix(1, 2, 1))
  # 6 steps: R runs only while tracing, on every backend.
  expect_lte(calls, 3)
  expect_gte(calls, 1)
})
