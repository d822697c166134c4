# Which Python customgrad uses and what it asks of it: the same on every
# backend (the requirements are checked for all three here), so run in one
# backend's process only (tools/test-backend.R).

test_that("library(customgrad) does not start Python", {
  skip_if_no_callr()
  started <- callr::r(
    function() {
      library(customgrad)
      h <- op_custom_gradient(function(x) list(x, function(upstream) upstream))
      reticulate::py_available(initialize = FALSE)
    },
    libpath = .libPaths()
  )
  expect_false(started)
})

test_that("customgrad uses keras3's r-keras, though the development environment is there", {
  skip_if_no_backend()
  skip_if_no_callr()
  home <- withr::local_tempdir()
  # keras3's r-keras where keras3 looks (WORKON_HOME), with the packages
  # of the development environment the tests run on; and, where customgrad
  # once kept one, a customgrad environment with the same packages.
  r_keras <- local_python_env(file.path(home, "venvs", "r-keras"))
  local_python_env(file.path(home, "data", "customgrad", "venv"))
  got <- callr::r(
    function() {
      Sys.unsetenv(c("RETICULATE_PYTHON", "VIRTUAL_ENV"))
      library(customgrad)
      h <- op_custom_gradient(function(x) {
        tuple(x * x, function(upstream) upstream * 3 * x)
      })
      grad <- as.numeric(op_grad(h)(2))
      config <- customgrad_config()
      list(grad = grad, python = config$python, chosen_by = config$chosen_by)
    },
    libpath = .libPaths(),
    env = c(
      callr::rcmd_safe_env(),
      WORKON_HOME = file.path(home, "venvs"),
      R_USER_DATA_DIR = file.path(home, "data")
    )
  )
  expect_identical(got$grad, 6)
  expect_identical(normalizePath(got$python), normalizePath(r_keras))
  expect_match(got$chosen_by, "keras3 (its r-keras environment", fixed = TRUE)
})

test_that("RETICULATE_PYTHON wins, and Python without Keras is a classed error", {
  skip_if_no_backend()
  skip_if_no_callr()
  bare <- local_python_env(withr::local_tempdir(), packages = FALSE)
  result <- first_call_in_fresh_r(RETICULATE_PYTHON = bare)
  expect_identical(normalizePath(result$python), normalizePath(bare))
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, bare, fixed = TRUE)
  expect_match(result$message, "RETICULATE_PYTHON", fixed = TRUE)
  expect_match(result$message, "keras3::install_keras(", fixed = TRUE)
})

test_that("with no Python to use, reticulate provisions one; when it can't, the error says how to get one", {
  skip_if_no_callr()
  empty <- withr::local_tempdir()
  # A uv that fails stands for a machine that can't download one.
  result <- first_call_in_fresh_r(
    R_USER_DATA_DIR = empty,
    R_USER_CACHE_DIR = empty,
    WORKON_HOME = empty,
    RETICULATE_UV = if (.Platform$OS.type == "windows") "NUL" else "/bin/false",
    PATH = if (.Platform$OS.type != "windows") "/usr/local/bin:/usr/bin:/bin",
    unset = c("RETICULATE_PYTHON", "VIRTUAL_ENV"),
    output = file.path(empty, "out.txt")
  )
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, "couldn't provision", fixed = TRUE)
  expect_match(result$message, "py_require()", fixed = TRUE)
  expect_match(result$message, "keras3::install_keras()", fixed = TRUE)
  expect_match(result$message, "RETICULATE_PYTHON", fixed = TRUE)
  expect_false(result$started)
})

test_that("customgrad asks py_require() for nothing beyond keras3's packages, on any backend, CPU or GPU", {
  # Twelve R processes, 18 s: too long for a check on CRAN.
  skip_on_cran()
  skip_if_no_callr()
  requirements <- function(attach_customgrad, backend, gpu) {
    callr::r(
      function(attach_customgrad, backend, gpu) {
        library(keras3)
        if (attach_customgrad) {
          library(customgrad)
        }
        use_backend(backend, gpu = gpu)
        reticulate::py_require()
      },
      args = list(attach_customgrad, backend, gpu),
      libpath = .libPaths()
    )
  }
  for (backend in c("tensorflow", "jax", "torch")) {
    for (gpu in c(TRUE, FALSE)) {
      label <- paste0(backend, ", gpu = ", gpu)
      without <- requirements(FALSE, backend, gpu)
      with <- requirements(TRUE, backend, gpu)
      expect_identical(
        sort(with$packages),
        sort(without$packages),
        label = label
      )
      expect_true("keras" %in% with$packages, label = label)
      # customgrad adds only its Python range.
      expect_identical(
        setdiff(with$python_version, without$python_version),
        paste0(">=", customgrad:::python_requirements()$python),
        label = label
      )
    }
  }
  # keras3 asks for GPU builds where asked to (on Linux, here), and
  # customgrad keeps them.
  skip_on_os(c("mac", "windows"))
  expect_true(any(grepl(
    "^jax\\[cuda",
    requirements(TRUE, "jax", TRUE)$packages
  )))
  expect_true(any(grepl(
    "and-cuda",
    requirements(TRUE, "tensorflow", TRUE)$packages
  )))
})

test_that("what customgrad needs from Python is read from DESCRIPTION, and tools/check-platforms.R reads it there", {
  needs <- customgrad:::python_requirements()
  system_req <- utils::packageDescription("customgrad")$SystemRequirements
  expect_match(
    gsub("\\s+", " ", system_req),
    sprintf("Python (>= %s) with keras (>= %s)", needs$python, needs$keras),
    fixed = TRUE
  )
  expect_true(all(!is.na(numeric_version(unlist(needs), strict = FALSE))))
  script <- skip_without_source("tools/check-platforms.R")
  expect_true(any(grepl(
    "customgrad:::python_requirements()",
    readLines(script),
    fixed = TRUE
  )))
})

test_that("an old Python or Keras is a classed error that says which", {
  config <- list(python = "/envs/old/bin/python", version = "3.9")
  expect_error(
    customgrad:::ensure_python_versions(config, NULL, keras = "3.15.1"),
    "Python 3.9, Keras 3.15.1",
    class = "customgrad_error_python_version"
  )
  config$version <- "3.11"
  err <- expect_error(
    customgrad:::ensure_python_versions(config, NULL, keras = "3.13.2"),
    class = "customgrad_error_python_version"
  )
  expect_match(conditionMessage(err), "py_install(\"keras\")", fixed = TRUE)
  expect_null(customgrad:::ensure_python_versions(
    config,
    NULL,
    keras = "3.14.0"
  ))
})
