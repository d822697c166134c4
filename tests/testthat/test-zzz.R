# What loading customgrad sets up once Keras is imported, whoever imports
# it: customgrad's layer registered with Keras, and nothing process-wide
# unless asked for.

# One fresh R process: keras3 starts Python and Keras; customgrad's Python
# module is not imported by anyone.
after_keras_start <- function(options = list()) {
  callr::r(
    function(options) {
      options(options)
      library(keras3)
      library(customgrad)
      invisible(op_add(1, 1)) # Keras starts
      gc <- reticulate::import("gc", convert = FALSE)
      serializable <- keras$saving$get_registered_object(
        "customgrad>CustomGradient"
      )
      list(
        registered = !is.null(serializable),
        frozen = reticulate::py_to_r(gc$get_freeze_count()),
        tracked = reticulate::py_len(gc$get_objects())
      )
    },
    args = list(options = options),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend())
  )
}

test_that("customgrad's layer is registered once keras3 imports Keras, and nothing is frozen", {
  skip_if_no_backend()
  skip_if_no_callr()
  as_is <- after_keras_start()
  expect_true(as_is$registered)
  expect_equal(as_is$frozen, 0)
})

test_that("options(customgrad.freeze_imports = TRUE) freezes what Keras' import made", {
  skip_if_no_backend()
  skip_if_no_callr()
  frozen <- after_keras_start(list(customgrad.freeze_imports = TRUE))
  expect_true(frozen$registered)
  # Keras and its backend: most of what the collector would walk
  expect_lt(frozen$tracked, frozen$frozen)
})
