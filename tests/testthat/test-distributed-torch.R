# use_distributed() on PyTorch; what every backend shares is in
# test-distributed.R.

test_that("several processes need the JAX backend", {
  skip_unless_backend("torch")
  expect_error(
    use_distributed(num_processes = 2, process_id = 1),
    class = "customgrad_error_distributed",
    regexp = "needs the JAX backend"
  )
})

test_that("PyTorch has no devices to arrange", {
  skip_unless_backend("torch")
  expect_error(
    use_distributed(local_devices = 2),
    class = "customgrad_error_distributed",
    regexp = "PyTorch backend has no devices to arrange"
  )
})
