test_that("keras3's config_backend() reports the backend this process runs", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) list(x, function(upstream) upstream))
  h(0)
  expected <- Sys.getenv("KERAS_BACKEND", unset = "tensorflow")
  expect_identical(config_backend(), expected)
  expect_identical(customgrad:::backend_name(), expected)
  keras <- reticulate::import("keras")
  expect_identical(keras$config$backend(), expected)
})

test_that("backend_available() is FALSE for another backend once Keras runs", {
  skip_if_no_backend()
  op_exp(0)
  other <- setdiff(c("tensorflow", "jax", "torch"), config_backend())
  expect_true(backend_available())
  expect_false(backend_available(other[[1]]))
  expect_false(backend_available(other[[2]]))
  expect_false(backend_available("theano"))
  expect_false(backend_available(NA))
})

test_that("backend_available() doesn't start Keras: use_backend() still works", {
  skip_if_no_backend()
  skip_if_no_callr()
  backend <- config_backend()
  other <- setdiff(c("tensorflow", "jax", "torch"), backend)[[1]]
  got <- callr::r(
    function(backend, other) {
      library(customgrad)
      available <- c(backend_available(other), backend_available(backend))
      sys <- reticulate::import("sys")
      keras_imported <- "keras" %in% names(sys$modules)
      use_backend(backend)
      h <- op_custom_gradient(function(x) list(x * 2, function(u) u * 2))
      list(
        available = available,
        keras_imported = keras_imported,
        backend = config_backend(),
        value = as.numeric(as.array(h(1)))
      )
    },
    args = list(backend = backend, other = other),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "")
  )
  expect_identical(got$available, c(TRUE, TRUE))
  expect_false(got$keras_imported)
  expect_identical(got$backend, backend)
  expect_identical(got$value, 2)
})

test_that("keras3's use_backend() chooses the backend customgrad uses", {
  skip_if_no_backend()
  skip_if_no_callr()
  backend <- config_backend()
  got <- callr::r(
    function(backend) {
      library(customgrad)
      use_backend(backend)
      h <- op_custom_gradient(function(x) {
        list(x * 2, function(upstream) upstream * 2)
      })
      y <- h(1)
      list(
        backend = config_backend(),
        value = as.numeric(as.array(y)),
        class = class(y)
      )
    },
    args = list(backend = backend),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "")
  )
  expect_identical(got$backend, backend)
  expect_identical(got$value, 2)
  module <- c(tensorflow = "tensorflow", jax = "jax", torch = "torch")[[
    backend
  ]]
  expect_true(any(startsWith(got$class, module)))
})
