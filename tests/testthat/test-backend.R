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

test_that("backend_available() never provisions Python: no uv run, no download", {
  skip_if_no_callr()
  skip_on_os("windows") # its fake uv is a shell script
  home <- withr::local_tempdir()
  calls <- file.path(home, "uv.log")
  fake_uv <- local_fake_uv(home, calls)
  got <- callr::r(
    function(calls) {
      Sys.unsetenv(c("RETICULATE_PYTHON", "VIRTUAL_ENV", "KERAS_BACKEND"))
      fake_download <- function(url, ...) {
        cat("download.file", url, "\n", file = calls, append = TRUE)
        stop("no downloads in this test")
      }
      # utils' bindings, and reticulate's (it imports download.file).
      for (env in list(
        asNamespace("utils"),
        as.environment("package:utils"),
        parent.env(asNamespace("reticulate"))
      )) {
        unlockBinding("download.file", env)
        assign("download.file", fake_download, envir = env)
      }
      setwd(tempdir())
      library(customgrad)
      list(
        available = c(backend_available(), backend_available("jax")),
        python_started = reticulate::py_available(initialize = FALSE)
      )
    },
    args = list(calls = calls),
    libpath = .libPaths(),
    env = c(
      callr::rcmd_safe_env(),
      HOME = home,
      R_USER_DATA_DIR = home,
      R_USER_CACHE_DIR = home,
      WORKON_HOME = home,
      RETICULATE_UV = fake_uv
    )
  )
  expect_identical(got$available, c(FALSE, FALSE))
  expect_false(got$python_started)
  expect_false(file.exists(calls))
})

test_that("backend_available() asks an installed Python without starting it: no uv run", {
  skip_if_no_backend()
  skip_if_no_callr()
  skip_on_os("windows") # its fake uv is a shell script
  home <- withr::local_tempdir()
  calls <- file.path(home, "uv.log")
  fake_uv <- local_fake_uv(home, calls)
  # A virtual environment: starting it, reticulate would have uv check its
  # packages against the index.
  python <- local_python_env(file.path(home, "env"))
  got <- callr::r(
    function() {
      library(customgrad)
      list(
        available = backend_available("jax"),
        python_started = reticulate::py_available(initialize = FALSE)
      )
    },
    libpath = .libPaths(),
    env = c(
      callr::rcmd_safe_env(),
      HOME = home,
      RETICULATE_PYTHON = python,
      RETICULATE_UV = fake_uv
    )
  )
  expect_true(got$available)
  expect_false(got$python_started)
  expect_false(file.exists(calls))
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
