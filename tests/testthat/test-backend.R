test_that("config_backend() reports the backend this process runs", {
  skip_if_no_backend()
  op_exp(0)
  expected <- Sys.getenv("KERAS_BACKEND", unset = "tensorflow")
  expect_identical(config_backend(), expected)
  keras <- reticulate::import("keras")
  expect_identical(keras$config$backend(), expected)
})

test_that("use_backend() refuses another backend once Keras runs", {
  skip_if_no_backend()
  op_exp(0)
  other <- setdiff(c("tensorflow", "jax", "torch"), config_backend())[[1]]
  expect_error(use_backend(other), class = "customgrad_error_backend_locked")
  expect_snapshot(use_backend("jax_or_torch"), error = TRUE)
  expect_identical(use_backend(config_backend()), config_backend())
  expect_false(backend_available(other))
})

test_that("use_backend() and KERAS_BACKEND choose the backend of a new session", {
  skip_if_no_backend()
  skip_if_no_callr()
  chosen <- callr::r(function() {
    customgrad::use_backend("jax")
    customgrad::config_backend()
  })
  expect_identical(chosen, "jax")
  from_env <- callr::r(
    function() customgrad::config_backend(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "torch")
  )
  expect_identical(from_env, "torch")
  default <- callr::r(
    function() customgrad::config_backend(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "")
  )
  expect_identical(default, "tensorflow")
})

test_that("a bad KERAS_BACKEND is a classed error at first use", {
  skip_if_no_callr()
  err <- callr::r(
    function() tryCatch(customgrad::op_exp(0), error = function(e) class(e)),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "theano")
  )
  expect_true("customgrad_error_backend_unknown" %in% err)
})
