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
  bare <- if (file.exists("/usr/bin/python3.11")) {
    "/usr/bin/python3.11"
  } else {
    bare
  }
  result <- callr::r(
    function() {
      err <- tryCatch(customgrad::op_exp(0), error = function(e) e)
      list(
        class = class(err),
        message = conditionMessage(err),
        python = reticulate::py_config()$python
      )
    },
    env = c(callr::rcmd_safe_env(), RETICULATE_PYTHON = bare)
  )
  expect_identical(result$python, bare)
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, "install_customgrad()", fixed = TRUE)
})

test_that("tensors made from R are collected once their bytes pass the threshold", {
  skip_if_no_backend()
  op_exp(0)
  memory <- customgrad:::the$memory
  collected <- 0
  memory$set_collector(
    customgrad:::r_callback(function() {
      collected <<- collected + 1
      customgrad:::collect_garbage()
    }),
    4000
  )
  withr::defer(memory$set_collector(
    customgrad:::r_callback(customgrad:::collect_garbage),
    getOption("customgrad.gc_threshold_mb", 128) * 2^20
  ))
  x <- op_convert_to_tensor(rep(1, 1000)) # 4,000 bytes of float32
  for (i in 1:3) {
    y <- op_exp(x)
  }
  expect_identical(collected, 0)
  for (i in 1:2) {
    y <- op_exp(x)
  } # 20,000 bytes: past 4 x 4,000
  expect_identical(collected, 1)
  expect_tensor(y, rep(exp(1), 1000))
})
