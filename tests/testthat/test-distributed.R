# use_distributed(): arguments, what each backend can arrange, and runs over
# several devices (TensorFlow, JAX) and processes (JAX) in fresh R sessions.

test_that("use_distributed() checks its arguments before Python", {
  expect_error(
    use_distributed(num_processes = 0),
    class = "customgrad_error_bad_argument",
    regexp = "`num_processes` must be a whole number, 1 or more"
  )
  expect_error(
    use_distributed(num_processes = 2, process_id = 2),
    class = "customgrad_error_bad_argument",
    regexp = "`process_id` must be below `num_processes`"
  )
  expect_error(
    use_distributed(num_processes = 2, process_id = -1),
    class = "customgrad_error_bad_argument",
    regexp = "`process_id` must be a whole number, 0 or more"
  )
  expect_error(
    use_distributed(local_devices = 1.5),
    class = "customgrad_error_bad_argument",
    regexp = "`local_devices` must be a whole number"
  )
  expect_error(
    use_distributed(num_processes = 2, coordinator = "localhost"),
    class = "customgrad_error_bad_argument",
    regexp = "`coordinator` must be \"host:port\""
  )
})

test_that("use_distributed() reads Keras' distribution variables", {
  withr::local_envvar(
    KERAS_DISTRIBUTION_NUM_PROCESSES = "1",
    KERAS_DISTRIBUTION_PROCESS_ID = "0",
    KERAS_DISTRIBUTION_JOB_ADDRESSES = "10.0.0.1:1234, 10.0.0.2:2345"
  )
  # One process on the default devices: nothing to arrange, even now.
  settings <- use_distributed()
  expect_identical(settings$num_processes, 1L)
  expect_identical(settings$process_id, 0L)
  expect_identical(settings$coordinator, "10.0.0.1:1234")
  expect_null(settings$local_devices)
})

test_that("use_distributed() after the backend started says to call it first", {
  skip_if_no_backend()
  op_grad(sin)(1) # Keras and the backend have started
  if (identical(config_backend(), "torch")) {
    expect_error(
      use_distributed(local_devices = 2),
      class = "customgrad_error_distributed",
      regexp = "PyTorch backend has no devices to arrange"
    )
  } else {
    expect_error(
      use_distributed(local_devices = 2),
      class = "customgrad_error_distributed_started",
      regexp = "before the backend starts"
    )
  }
})
