# What loading customgrad sets up: TensorFlow's start-up lines silenced,
# whoever starts Python, unless asked for.

test_that("TensorFlow's start-up lines are silenced", {
  skip_if_no_backend()
  skip_if_no_callr()
  # Everything a fresh R process writes while keras3 (not customgrad)
  # starts Python and TensorFlow is imported, on every backend alike.
  startup_output <- function(show_log) {
    out <- tempfile()
    callr::r(
      function(show_log) {
        options(customgrad.tf_startup_log = show_log)
        library(customgrad)
        library(keras3)
        reticulate::import("tensorflow")
        invisible(op_add(1, 1))
      },
      args = list(show_log = show_log),
      libpath = .libPaths(),
      env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend()),
      stdout = out,
      stderr = "2>&1"
    )
    readLines(out)
  }
  quiet <- startup_output(show_log = FALSE)
  expect_false(any(grepl(
    "oneDNN|absl::InitializeLog|cpu_feature_guard",
    quiet
  )))
  # No positive control: which start-up lines TensorFlow prints depends on
  # the CPU (oneDNN's only on some), so "they show without the option"
  # would hold only on some machines.
})

test_that("a TensorFlow import that fails still fails, with its error", {
  skip_if_no_backend()
  skip_if_no_callr()
  err <- callr::r(
    function() {
      library(customgrad)
      reticulate::py_available(initialize = TRUE)
      tryCatch(
        reticulate::py_run_string(
          "import sys\nsys.modules['tensorflow.python'] = None\nimport tensorflow"
        ),
        error = function(e) conditionMessage(e)
      )
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend())
  )
  expect_match(err, "tensorflow.python|import", ignore.case = TRUE)
})

test_that("what Keras' import made is frozen out of Python's cyclic collector, unless asked not to", {
  skip_if_no_backend()
  skip_if_no_callr()
  frozen_after_start <- function(freeze) {
    callr::r(
      function(freeze) {
        options(customgrad.freeze_imports = freeze)
        library(keras3)
        library(customgrad)
        invisible(op_add(1, 1)) # Keras starts
        gc <- reticulate::import("gc", convert = FALSE)
        list(
          frozen = reticulate::py_to_r(gc$get_freeze_count()),
          tracked = reticulate::py_len(gc$get_objects())
        )
      },
      args = list(freeze = freeze),
      libpath = .libPaths(),
      env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend())
    )
  }
  frozen <- frozen_after_start(TRUE)
  as_is <- frozen_after_start(FALSE)
  expect_equal(as_is$frozen, 0)
  # Keras and its backend: most of what the collector would walk
  expect_gt(frozen$frozen, 100000)
  expect_lt(frozen$tracked, as_is$tracked / 2)
})
