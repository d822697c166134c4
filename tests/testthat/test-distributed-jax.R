# use_distributed() on JAX, in fresh R sessions; what every backend shares is in
# test-distributed.R.

test_that("2 JAX devices in one process train with DataParallel", {
  skip_unless_backend("jax")
  skip_if_no_callr()
  result <- run_in_fresh_r(function() {
    library(keras3)
    library(customgrad)
    use_distributed(local_devices = 2)
    jax <- reticulate::import("jax")
    keras$distribution$set_distribution(keras$distribution$DataParallel())
    set_random_seed(1)
    inputs <- keras_input(3)
    outputs <- inputs |>
      layer_dense(4) |>
      layer_gradient_reversal(lambda = 2) |>
      layer_dense(1)
    model <- keras_model(inputs, outputs)
    model |> compile(optimizer = optimizer_sgd(0.1), loss = "mse")
    set.seed(1)
    x <- matrix(rnorm(32 * 3), ncol = 3)
    history <- model |> fit(x, x[, 1], batch_size = 16, epochs = 1, verbose = 0)
    list(devices = length(jax$devices()), loss = history$metrics$loss[[1]])
  })
  expect_identical(result$devices, 2L)
  expect_true(is.finite(result$loss))
})

test_that("2 JAX processes agree, and match one process on the combined batches", {
  skip_unless_backend("jax")
  skip_if_not_installed("processx")
  run <- run_distributed_example(steps = 3)
  expect_length(run$processes, 2)
  expect_identical(run$processes[[1]], run$processes[[2]])
  expect_gt(max(abs(run$alone)), 0)
  expect_equal(run$processes[[1]], run$alone, tolerance = 1e-5)
  expect_match(run$output[[1]], "process 0 of 2: loss")
  expect_match(run$output[[2]], "process 1 of 2: loss")
})

test_that("process 0 of a JAX run waits at R's exit for the others to finish", {
  skip_unless_backend("jax")
  skip_if_not_installed("processx")
  # Process 1 works on for seconds after process 0 has nothing left to do.
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(
    c(
      "library(keras3)",
      "use_backend('jax')",
      "library(customgrad)",
      "id <- use_distributed()$process_id",
      "if (id == 1) Sys.sleep(8)",
      "cat('process', id, 'done:', as.numeric(op_sum(op_ones(3))), '\\n')"
    ),
    script
  )
  port <- free_port()
  runs <- lapply(0:1, function(id) {
    start_jax_process(script, character(), 2L, id, port)
  })
  output <- wait_for_processes(runs, timeout = 120)
  expect_match(output[[1]], "process 0 done: 3")
  expect_match(output[[2]], "process 1 done: 3")
  expect_identical(
    vapply(runs, function(run) run$get_exit_status(), 1L),
    c(0L, 0L)
  )
})
