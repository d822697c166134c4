test_that("library(customgrad) does not start Python", {
  skip_if_no_callr()
  started <- callr::r(function() {
    library(customgrad)
    reticulate::py_available(initialize = FALSE)
  })
  expect_false(started)
})

test_that("a fresh session finds customgrad's own Python environment", {
  skip_if_no_backend()
  skip_if_no_callr()
  python <- callr::r(function() {
    Sys.unsetenv("RETICULATE_PYTHON")
    customgrad::op_exp(0)
    reticulate::py_config()$python
  })
  expect_identical(
    normalizePath(python),
    normalizePath(file.path(customgrad::python_env_path(), "bin", "python"))
  )
})

test_that("RETICULATE_PYTHON wins, and Python without Keras is a classed error", {
  skip_if_no_callr()
  bare <- Sys.which("python3.11")
  skip_if(!nzchar(bare), "no python3.11 on the PATH")
  bare <- if (file.exists("/usr/bin/python3.11")) "/usr/bin/python3.11" else bare
  result <- callr::r(function() {
    err <- tryCatch(customgrad::op_exp(0), error = function(e) e)
    list(
      class = class(err), message = conditionMessage(err),
      python = reticulate::py_config()$python
    )
  }, env = c(callr::rcmd_safe_env(), RETICULATE_PYTHON = bare))
  expect_identical(result$python, bare)
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, "install_customgrad()", fixed = TRUE)
})
