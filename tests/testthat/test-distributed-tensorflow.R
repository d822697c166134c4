# use_distributed() on TensorFlow; what every backend shares is in
# test-distributed.R.

test_that("several processes need the JAX backend", {
  skip_unless_backend("tensorflow")
  expect_error(
    use_distributed(num_processes = 2, process_id = 1),
    class = "customgrad_error_distributed",
    regexp = "needs the JAX backend"
  )
})

test_that("MirroredStrategy over 2 logical CPUs trains custom gradients (TensorFlow)", {
  skip_unless_backend("tensorflow")
  skip_if_no_callr()
  result <- run_in_fresh_r(function() {
    # customgrad first (keras3 after it), then keras3's own attach.
    library(customgrad)
    library(keras3)
    use_distributed(local_devices = 2)
    tf <- tensorflow::tf
    strategy <- tf$distribute$MirroredStrategy()

    log1pexp <- op_custom_gradient(function(x) {
      e <- op_exp(x)
      tuple(op_log(1 + e), function(upstream) upstream * (1 - 1 / (1 + e)))
    })
    # Traced first on a replica's thread, inside a compiled step.
    py <- reticulate::py_run_string(
      paste(
        "import tensorflow as tf",
        "def make_step(fn, strategy):",
        "    def replica(x):",
        "        with tf.GradientTape() as tape:",
        "            tape.watch(x)",
        "            y = tf.reduce_sum(fn(x))",
        "        return tape.gradient(y, x)",
        "    return tf.function(lambda x: strategy.run(replica, args=(x,)))",
        sep = "\n"
      ),
      convert = FALSE
    )
    step <- py$make_step(reticulate::r_to_py(log1pexp), strategy)
    grads <- strategy$experimental_local_results(
      step(tf$constant(c(-1, 0, 30), dtype = "float32"))
    )

    # fit() on 2 replicas against one device, from the same weights.
    set.seed(3)
    x <- matrix(rnorm(64 * 4), ncol = 4)
    y <- sin(x[, 1]) + x[, 2]
    build <- function() {
      set_random_seed(1)
      inputs <- keras_input(4)
      outputs <- inputs |>
        layer_dense(8) |>
        layer_custom_gradient(log1pexp) |>
        layer_gradient_reversal(lambda = 0.5) |>
        layer_dense(1)
      model <- keras_model(inputs, outputs)
      model |> compile(optimizer = optimizer_sgd(0.1), loss = "mse")
      model
    }
    train <- function(model) {
      model |>
        fit(x, y, batch_size = 32, epochs = 2, shuffle = FALSE, verbose = 0)
      unlist(lapply(model$get_weights(), as.numeric))
    }
    mirrored <- with(strategy$scope(), build())
    list(
      replicas = strategy$num_replicas_in_sync,
      grads = lapply(grads, as.array),
      mirrored = train(mirrored),
      one_device = train(build())
    )
  })
  expect_identical(result$replicas, 2L)
  expected <- 1 / (1 + exp(-c(-1, 0, 30)))
  for (g in result$grads) {
    expect_equal(as.numeric(g), expected, tolerance = 1e-6)
  }
  expect_gt(max(abs(result$one_device)), 0)
  expect_equal(result$mirrored, result$one_device, tolerance = 1e-5)
})
