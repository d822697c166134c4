test_that("customgrad_config() reports the Python, versions and every backend", {
  skip_if_no_backend()
  cfg <- customgrad_config()
  expect_s3_class(cfg, "customgrad_config")
  expect_true(file.exists(cfg$python))
  expect_false(is.na(cfg$versions[["keras"]]))
  expect_setequal(cfg$backends$backend, c("tensorflow", "jax", "torch"))
  # CI installs all three backends (install_customgrad()'s default).
  expect_true(all(cfg$backends$imports))
  expect_true(all(grepl("cpu", tolower(cfg$backends$devices))))
  expect_identical(cfg$active_backend, config_backend())
  report <- paste(cli::cli_fmt(print(cfg)), collapse = "\n")
  expect_match(report, "Active backend", fixed = TRUE)
  expect_match(report, "torch: imports", fixed = TRUE)
})

test_that("customgrad_config() does not start Keras: the backend can still be chosen", {
  skip_if_no_backend()
  skip_if_no_callr()
  out <- callr::r(
    function() {
      library(customgrad)
      invisible(customgrad_config())
      started <- customgrad:::keras_backend_in_python()
      keras3::use_backend("jax")
      list(started = started, backend = keras3::config_backend())
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "torch")
  )
  expect_null(out$started)
  expect_identical(out$backend, "jax")
})

test_that("the backend checks leave nothing in the temporary directory", {
  skip_if_no_backend()
  # As under R CMD check: Python's temporary directory is R's.
  withr::local_envvar(TMPDIR = tempdir())
  before <- dir(tempdir())
  probe_backend <- customgrad:::probe_backend
  out <- probe_backend(reticulate::py_config()$python, "torch")
  expect_true(out$imports)
  expect_setequal(dir(tempdir()), before)
})
