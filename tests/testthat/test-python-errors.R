# Errors that come back from Python: customgrad's with R's message and the
# user's call, wherever they were raised (python-errors.R).

test_that("a model with a custom-gradient function in a Lambda layer fails at save_model(), naming the fix and the user's call", {
  skip_if_no_backend()
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    tuple(op_log(1 + e), \(upstream) upstream * (1 - 1 / (1 + e)))
  })
  model <- keras_model_sequential(input_shape = 3) |>
    layer_dense(4) |>
    layer_lambda(log1pexp, name = "softplus") |>
    layer_dense(1)
  path <- withr::local_tempfile(fileext = ".keras")
  err <- expect_error(
    save_model(model, path),
    class = "customgrad_error_not_serializable"
  )
  expect_s3_class(err, "customgrad_error")
  message <- conditionMessage(err)
  expect_match(
    message,
    "can't save the custom-gradient function in the `Lambda` layer \"softplus\"",
    fixed = TRUE
  )
  expect_match(
    message,
    "i Make the layer with `layer_custom_gradient()` instead of `layer_lambda()`",
    fixed = TRUE
  )
  # The hint runs as printed: the vignette, where it was built (make test
  # installs it so); else the help page (test-docs.R).
  expect_match(
    message,
    "vignette(\"troubleshooting\", package = \"customgrad\")",
    fixed = TRUE
  )
  # The call is the one the user made, not reticulate's.
  expect_equal(conditionCall(err), quote(save_model(model, path)))
  # Elsewhere in a model (an activation): the same class, no layer named.
  dense <- keras_model_sequential(input_shape = 3) |>
    layer_dense(2, activation = log1pexp)
  err <- expect_error(
    save_model(dense, withr::local_tempfile(fileext = ".keras")),
    class = "customgrad_error_not_serializable"
  )
  expect_match(conditionMessage(err), "in this model", fixed = TRUE)

  # As a layer of its own, it saves and reloads.
  model <- keras_model_sequential(input_shape = 3) |>
    layer_dense(4) |>
    layer_custom_gradient(log1pexp) |>
    layer_dense(1)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  x <- matrix(1:6 / 10, ncol = 3)
  expect_equal(
    predict(load_model(path), x, verbose = 0),
    predict(model, x, verbose = 0),
    tolerance = 1e-6
  )
})

test_that("a customgrad error raised in Python through keras3's own functions gets R's message and the user's call", {
  skip_if_no_backend()
  v <- keras3::keras$Variable(2)
  times_v <- op_custom_gradient(\(x) {
    tuple(op_multiply(x, v), \(upstream) op_multiply(upstream, v))
  })
  model <- keras_model_sequential(input_shape = 3) |>
    layer_custom_gradient(times_v)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  err <- expect_error(
    load_model(path),
    class = "customgrad_error_load_function"
  )
  expect_match(
    conditionMessage(err),
    "^The custom-gradient layer \"[a-z_0-9]+\" needs its function `times_v`\\.\n"
  )
  expect_match(
    conditionMessage(err),
    "i Pass the function when loading the model: in R `load_model(path, custom_objects = list(times_v = <function>))`",
    fixed = TRUE
  )
  expect_equal(conditionCall(err), quote(load_model(path)))
  # Other errors of Python keep reticulate's message and call.
  err <- expect_error(load_model(tempfile(fileext = ".keras")))
  expect_false(inherits(err, "customgrad_error"))
})

test_that("a customgrad error from a Python function called in R names that call, for rlang and base R alike", {
  skip_if_no_backend()
  # Evaluated as at the console: the tests' own functions count as
  # customgrad's (their environment is its namespace's child).
  user <- new.env(parent = globalenv())
  err <- expect_error(
    evalq(
      {
        h <- op_custom_gradient(\(x) tuple(x * x, \(upstream) upstream))
        x <- op_convert_to_tensor(1, "float32")
        keras$ops$jvp(h, tuple(x), tuple(x))
      },
      user
    ),
    class = "customgrad_error_transform"
  )
  user_call <- quote(keras$ops$jvp(h, tuple(x), tuple(x)))
  expect_equal(conditionCall(err), user_call)
  expect_equal(err[["call"]], user_call)
  expect_equal(err$call, user_call)
  expect_match(
    cli::ansi_strip(rlang::cnd_message(err, prefix = TRUE)),
    "Error in `keras$ops$jvp()`:",
    fixed = TRUE
  )
})

test_that("with_python_errors() keeps nothing of a value once it returns", {
  # A collection run inside the next call (as customgrad's are) must find
  # the last value garbage: R kept the frame around withCallingHandlers()
  # reachable, and a tensor in it outlived the collection.
  finalized <- 0
  value <- function() {
    e <- new.env()
    reg.finalizer(e, function(e) finalized <<- finalized + 1)
    e
  }
  for (i in 1:6) {
    customgrad:::with_python_errors({
      gc(full = FALSE)
      value()
    })
  }
  expect_equal(finalized, 5) # all but the last one's value
})
