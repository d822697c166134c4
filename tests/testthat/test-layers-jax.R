# JAX only: export, and data parallelism over several devices.

test_that("on JAX, model$export() works and serves the same predictions", {
  skip_if_no_backend()
  expect_export_predicts_same()
})

test_that("on JAX, training runs data-parallel over two devices, R only while tracing", {
  skip_if_no_backend()
  skip_if_no_callr()
  # XLA's device count is fixed when JAX starts: a fresh R process.
  result <- callr::r(
    function() {
      library(customgrad)
      devices <- keras$distribution$list_devices()
      keras$distribution$set_distribution(
        keras$distribution$DataParallel(devices = devices)
      )
      runs <- 0
      log1pexp <- op_custom_gradient(\(x) {
        runs <<- runs + 1
        e <- op_exp(x)
        tuple(op_log(1 + e), \(upstream) upstream * (1 - 1 / (1 + e)))
      })
      set.seed(1)
      x <- matrix(rnorm(256 * 3), ncol = 3)
      y <- matrix(rowSums(x), ncol = 1)
      model <- keras_model_sequential(input_shape = 3) |>
        layer_dense(8) |>
        layer_custom_gradient(log1pexp) |>
        layer_gradient_clip_norm(10) |>
        layer_dense(1)
      model |> compile(optimizer = optimizer_sgd(0.05), loss = "mse")
      history <- model |> fit(x, y, epochs = 4, batch_size = 32, verbose = 0)
      list(
        devices = unlist(devices),
        loss = history$metrics$loss,
        runs = runs,
        mesh = reticulate::py_str(model$layers[[1]]$kernel$value$sharding$mesh)
      )
    },
    libpath = .libPaths(),
    env = c(
      callr::rcmd_safe_env(),
      KERAS_BACKEND = "jax",
      XLA_FLAGS = "--xla_force_host_platform_device_count=2"
    )
  )
  expect_identical(result$devices, c("cpu:0", "cpu:1"))
  expect_match(result$mesh, "'batch': 2", fixed = TRUE)
  expect_lt(result$loss[[4]], result$loss[[1]] / 2)
  expect_identical(result$runs, 1)
})
