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

test_that("customgrad and keras3 share customgrad's Python environment", {
  skip_if_no_backend()
  skip_if_no_callr()
  got <- callr::r(
    function() {
      # (reticulate sets VIRTUAL_ENV in the parent, which would choose.)
      Sys.unsetenv(c("RETICULATE_PYTHON", "VIRTUAL_ENV"))
      library(customgrad)
      op_exp(0) # keras3 starts Python first
      list(
        python = reticulate::py_config()$python,
        forced = reticulate::py_config()$forced
      )
    },
    libpath = .libPaths()
  )
  expect_identical(
    normalizePath(got$python),
    normalizePath(file.path(python_env_path(), "bin", "python"))
  )
  expect_match(got$forced, "customgrad", fixed = TRUE)
})

test_that("customgrad's environment is chosen before keras3's r-keras", {
  skip_if_no_backend()
  skip_if_no_callr()
  skip_if(!file.exists("/usr/bin/python3.11"), "no /usr/bin/python3.11")
  home <- withr::local_tempdir()
  # An r-keras environment without Keras, where keras3 would look first.
  status <- system2(
    "/usr/bin/python3.11",
    c("-m", "venv", "--without-pip", file.path(home, "r-keras"))
  )
  expect_identical(status, 0L)
  python <- callr::r(
    function() {
      Sys.unsetenv(c("RETICULATE_PYTHON", "VIRTUAL_ENV"))
      library(customgrad)
      op_exp(0)
      reticulate::py_config()$python
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), WORKON_HOME = home)
  )
  expect_identical(
    normalizePath(python),
    normalizePath(file.path(python_env_path(), "bin", "python"))
  )
})

test_that("RETICULATE_PYTHON wins, and Python without Keras is a classed error", {
  skip_if_no_callr()
  bare <- "/usr/bin/python3.11"
  skip_if(!file.exists(bare), "no /usr/bin/python3.11")
  result <- first_call_in_fresh_r(RETICULATE_PYTHON = bare)
  expect_identical(result$python, bare)
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, bare, fixed = TRUE)
  expect_match(result$message, "RETICULATE_PYTHON", fixed = TRUE)
  expect_match(result$message, "install_customgrad()", fixed = TRUE)
})

test_that("with no Python to use, reticulate provisions one; when it can't, the error says how to get one", {
  skip_if_no_callr()
  empty <- withr::local_tempdir()
  # A uv that fails stands for a machine that can't download one.
  result <- first_call_in_fresh_r(
    R_USER_DATA_DIR = empty,
    R_USER_CACHE_DIR = empty,
    WORKON_HOME = empty,
    RETICULATE_UV = "/bin/false",
    PATH = "/usr/local/bin:/usr/bin:/bin",
    unset = c("RETICULATE_PYTHON", "VIRTUAL_ENV"),
    output = file.path(empty, "out.txt")
  )
  expect_true("customgrad_error_python_missing" %in% result$class)
  expect_match(result$message, "couldn't provision", fixed = TRUE)
  expect_match(result$message, "py_require()", fixed = TRUE)
  expect_match(result$message, "install_customgrad()", fixed = TRUE)
  expect_match(result$message, "RETICULATE_PYTHON", fixed = TRUE)
  expect_false(result$started)
})

test_that("customgrad declares what it needs from Python with py_require()", {
  skip_if_no_callr()
  packages <- callr::r(
    function() {
      library(customgrad)
      reticulate::py_require()$packages
    },
    libpath = .libPaths()
  )
  expect_true("keras" %in% packages)
})

test_that("tensors handed to R are collected once their bytes pass the threshold", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    list(x * 2, function(upstream) upstream * 2)
  })
  h(0)
  memory <- reticulate::import("customgrad._memory", convert = FALSE)
  # Bytes only: the process-memory trigger (pytest tests it) moves by more
  # than this test's threshold on its own.
  measure <- reticulate::py_get_attr(memory, "_memory_now")
  reticulate::py_set_attr(
    memory,
    "_memory_now",
    reticulate::py_eval("lambda fresh=False: None")
  )
  withr::defer(reticulate::py_set_attr(memory, "_memory_now", measure))
  collected <- 0
  memory$set_collector(
    customgrad:::r_callback(function(full) {
      collected <<- collected + 1
      customgrad:::collect_garbage(full)
    }),
    4000
  )
  withr::defer(memory$set_collector(
    customgrad:::r_callback(customgrad:::collect_garbage),
    getOption("customgrad.gc_threshold_mb", 64) * 2^20
  ))
  x <- op_convert_to_tensor(rep(1, 1000), dtype = "float32") # 4,000 bytes
  y <- h(x)
  y <- h(x) # 8,000 bytes handed to R: a collection is due
  expect_identical(collected, 0)
  y <- h(x) # collects at the start of the call
  expect_identical(collected, 1)
  expect_tensor(y, rep(2, 1000))
})
