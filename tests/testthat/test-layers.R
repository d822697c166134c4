# layer_custom_gradient(): a Keras layer that trains, composes, saves and
# loads (in a fresh R session and in plain Python).

test_that("a custom-gradient layer trains like the same model with softplus, and R runs f once", {
  skip_if_no_backend()
  data <- regression_data()
  # TensorFlow: in a tf.function, and compiled with XLA; JAX: under jit;
  # torch: eagerly.
  modes <- switch(
    config_backend(),
    tensorflow = list(FALSE, TRUE),
    jax = list(TRUE),
    torch = list(FALSE)
  )
  for (jit in modes) {
    counter <- new.env()
    log1pexp <- counted_log1pexp(counter)
    custom <- three_layer_model(\(x) layer_custom_gradient(x, log1pexp))
    reference <- three_layer_model(\(x) layer_activation(x, "softplus"))
    custom_loss <- fit_losses(custom, data, jit_compile = jit)
    reference_loss <- fit_losses(reference, data, jit_compile = jit)
    # log(1 + exp(x)) is softplus, and its custom gradient is the sigmoid.
    expect_equal(custom_loss, reference_loss, tolerance = 1e-5)
    expect_lt(custom_loss[[3]], custom_loss[[1]])
    expect_equal(
      get_weights(custom)[[1]],
      get_weights(reference)[[1]],
      tolerance = 1e-5
    )
    # Traced once, on the model's symbolic input: every batch size, fit(),
    # evaluate() and predict() replay that trace.
    expect_equal(
      evaluate(custom, data$x, data$y, verbose = 0)[["loss"]],
      evaluate(reference, data$x, data$y, verbose = 0)[["loss"]],
      tolerance = 1e-5
    )
    expect_equal(
      predict(custom, data$x[1:5, ], verbose = 0),
      predict(reference, data$x[1:5, ], verbose = 0),
      tolerance = 1e-5
    )
    expect_identical(counter$f, 1)
  }
})

test_that("it composes with Sequential models, layer_lambda() and Model subclasses", {
  skip_if_no_backend()
  data <- regression_data()
  counter <- new.env()
  log1pexp <- counted_log1pexp(counter)
  sequential <- keras_model_sequential(input_shape = 3) |>
    layer_dense(4, kernel_initializer = "ones") |>
    layer_custom_gradient(log1pexp) |>
    layer_lambda(\(x) x * 2) |>
    layer_dense(1, kernel_initializer = "ones")
  expect_s3_class(
    sequential$layers[[2]],
    "customgrad.layers.CustomGradient"
  )
  losses <- fit_losses(sequential, data)
  expect_lt(losses[[3]], losses[[1]])

  Subclassed <- Model( # nolint: object_name_linter. keras3 names classes so.
    "Subclassed",
    initialize = function(f, ...) {
      super$initialize(...)
      self$below <- layer_dense(units = 4, kernel_initializer = "ones")
      self$custom <- layer_custom_gradient(f = f)
      self$above <- layer_dense(units = 1, kernel_initializer = "ones")
    },
    call = function(inputs) {
      inputs |> self$below() |> self$custom() |> self$above()
    }
  )
  subclassed <- Subclassed(log1pexp)
  losses_subclassed <- fit_losses(subclassed, data)
  # The same weights and steps: the same losses as the Sequential model
  # without its doubling, checked against softplus.
  reference <- three_layer_model(\(x) layer_activation(x, "softplus"))
  expect_equal(losses_subclassed, fit_losses(reference, data), tolerance = 1e-5)
  # R ran f once per traced signature: the symbolic one, and on JAX and
  # torch (which call a subclassed model on concrete batches) the batch
  # shapes of fit() (16) at most.
  expect_lte(counter$f, 3)
})

test_that("a plain R function is made a custom-gradient function; bad f is an error", {
  skip_if_no_backend()
  layer <- layer_custom_gradient(f = \(x) {
    tuple(x * 3, \(upstream) upstream * 3)
  })
  expect_tensor(layer(op_convert_to_tensor(c(1, 2), "float32")), c(3, 6))
  expect_error(
    layer_custom_gradient(f = "exp"),
    class = "customgrad_error_not_function"
  )
})

test_that("a saved model round-trips in a fresh R session, with and without its function", {
  skip_if_no_backend()
  skip_if_no_callr()
  data <- regression_data()
  counter <- new.env()
  log1pexp <- counted_log1pexp(counter)
  model <- three_layer_model(\(x) {
    x |>
      layer_custom_gradient(log1pexp) |>
      layer_gradient_reversal(lambda = 0.5)
  })
  fit_losses(model, data, epochs = 1)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  expected <- predict(model, data$x, verbose = 0)

  loaded <- run_in_fresh_r(
    function(path, x, y) {
      library(customgrad)
      # The function, defined again in the new session.
      log1pexp <- op_custom_gradient(\(x) {
        e <- op_exp(x)
        grad <- function(..., upstream = NULL) {
          upstream <- upstream %||% ..1
          op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
        }
        tuple(op_log(1 + e), grad)
      })
      run <- function(model) {
        before <- predict(model, x, verbose = 0)
        weights <- get_weights(model)[[1]]
        model |> compile(optimizer = optimizer_sgd(0.01), loss = "mse")
        history <- model |>
          fit(x, y, epochs = 2, batch_size = 16, shuffle = FALSE, verbose = 0)
        list(
          predictions = before,
          loss = history$metrics$loss,
          moved = max(abs(get_weights(model)[[1]] - weights))
        )
      }
      list(
        with_function = run(load_model(
          path,
          custom_objects = list(log1pexp = log1pexp)
        )),
        traces_only = run(load_model(path))
      )
    },
    list(path = path, x = data$x, y = data$y)
  )
  for (run in loaded) {
    expect_equal(run$predictions, expected, tolerance = 1e-6)
    expect_true(all(is.finite(run$loss)))
    expect_gt(run$moved, 0)
  }
  expect_equal(
    loaded$with_function$loss,
    loaded$traces_only$loss,
    tolerance = 1e-6
  )
})

test_that("a saved model loads and trains in plain Python, without R", {
  skip_if_no_backend()
  data <- regression_data()
  log1pexp <- counted_log1pexp(new.env())
  model <- three_layer_model(\(x) {
    x |> layer_custom_gradient(log1pexp) |> layer_straight_through("round")
  })
  fit_losses(model, data, epochs = 1)
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  x_path <- withr::local_tempfile(fileext = ".csv")
  utils::write.table(
    data$x,
    x_path,
    sep = ",",
    row.names = FALSE,
    col.names = FALSE
  )
  out <- run_plain_python(c(
    "import numpy as np, keras",
    "import customgrad.layers",
    sprintf("model = keras.saving.load_model('%s')", path),
    sprintf("x = np.loadtxt('%s', delimiter=',', dtype='float32')", x_path),
    "y = x.sum(axis=1, keepdims=True)",
    "print('prediction', ' '.join(repr(float(v)) for v in model.predict(x, verbose=0)[:5, 0]))",
    "before = model.get_weights()[0].copy()",
    "model.compile(optimizer=keras.optimizers.SGD(0.01), loss='mse')",
    "history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)",
    "print('loss', ' '.join(repr(v) for v in history.history['loss']))",
    "print('moved', float(np.abs(model.get_weights()[0] - before).max()))"
  ))
  field <- function(name) {
    line <- grep(paste0("^", name, " "), out, value = TRUE)
    as.numeric(strsplit(sub(paste0("^", name, " "), "", line), " ")[[1]])
  }
  expect_equal(
    field("prediction"),
    as.vector(predict(model, data$x[1:5, ], verbose = 0)),
    tolerance = 1e-5
  )
  expect_true(all(is.finite(field("loss"))))
  expect_gt(field("moved"), 0)
})

test_that("a load that can't find the function is a classed error saying what to pass", {
  skip_if_no_backend()
  v <- keras3::keras$Variable(2)
  # Its trace reads a captured variable: not saved, so the function is needed.
  scale_by_v <- op_custom_gradient(\(x) {
    tuple(op_multiply(x, v), \(upstream) op_multiply(upstream, v))
  })
  model <- three_layer_model(\(x) layer_custom_gradient(x, scale_by_v))
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  err <- expect_error(
    load_model(path),
    class = "customgrad_error_load_function"
  )
  expect_match(conditionMessage(err), "needs its function `scale_by_v`")
  expect_match(
    conditionMessage(err),
    "custom_objects = list(scale_by_v = <function>)",
    fixed = TRUE
  )
  loaded <- load_model(path, custom_objects = list(scale_by_v = scale_by_v))
  x <- matrix(1:6 / 10, ncol = 3)
  expect_equal(
    predict(loaded, x, verbose = 0),
    predict(model, x, verbose = 0),
    tolerance = 1e-6
  )
  # Registered once instead, as keras3 registers custom objects; for this
  # test only (Keras keeps the registration for the session).
  saving <- reticulate::import("keras", convert = FALSE)$saving
  names_now <- function() {
    names(reticulate::py_to_r(saving$get_custom_objects()))
  }
  before <- names_now()
  register_keras_serializable(scale_by_v, name = "scale_by_v")
  added <- setdiff(names_now(), before) # keras3 prefixes the package
  withr::defer(
    for (name in added) {
      saving$get_custom_objects()$pop(name)
    }
  )
  expect_no_error(load_model(path))

  # Saved traces serve the shapes they were made for, any batch size;
  # another rank needs the function.
  log1pexp <- counted_log1pexp(new.env())
  model <- three_layer_model(\(x) layer_custom_gradient(x, log1pexp))
  save_model(model, path, overwrite = TRUE)
  layer <- load_model(path)$layers[[3]]
  expect_tensor(
    layer(op_convert_to_tensor(matrix(0, 2, 4), "float32")),
    matrix(log(2), 2, 4),
    tolerance = 1e-6
  )
  err <- expect_error(
    layer(op_ones(c(2, 4, 1))),
    class = "customgrad_error_load_function"
  )
  expect_match(conditionMessage(err), "don't serve inputs of this shape")
})

test_that("saved traces carry their format; other formats fail with a classed error saying what to do", {
  skip_if_no_backend()
  log1pexp <- counted_log1pexp(new.env())
  model <- three_layer_model(\(x) layer_custom_gradient(x, log1pexp))
  path <- withr::local_tempfile(fileext = ".keras")
  save_model(model, path)
  format <- customgrad:::customgrad_py("_saving")$FORMAT
  expect_identical(saved_trace_formats(path), format)
  x <- matrix(seq(-1, 1, length.out = 6), ncol = 3)
  expected <- predict(model, x, verbose = 0)

  # customgrad 0.1.0 saved the same format without a number.
  loaded <- load_model(local_trace_format(path, NULL))
  expect_equal(predict(loaded, x, verbose = 0), expected, tolerance = 1e-6)

  newer <- local_trace_format(path, format + 1L)
  err <- expect_error(load_model(newer), class = "customgrad_error_load_format")
  expect_s3_class(err, "customgrad_error")
  expect_match(conditionMessage(err), "was saved by a newer customgrad")
  expect_match(
    conditionMessage(err),
    sprintf(
      "traces have format %d; this customgrad reads format %d",
      format + 1L,
      format
    )
  )
  expect_match(conditionMessage(err), "Upgrade customgrad to load it")
  expect_match(
    conditionMessage(err),
    "custom_objects = list(log1pexp = <function>)",
    fixed = TRUE
  )

  older <- local_trace_format(path, 0L)
  err <- expect_error(load_model(older), class = "customgrad_error_load_format")
  expect_match(conditionMessage(err), "was saved by an older customgrad")
  expect_match(
    conditionMessage(err),
    "Load it with the customgrad version that saved it"
  )
  expect_match(
    conditionMessage(err),
    "save the model again with this customgrad"
  )

  # The function, passed, stands in for the traces: the model loads, and
  # saved again, its traces have this customgrad's format.
  loaded <- load_model(older, custom_objects = list(log1pexp = log1pexp))
  expect_equal(predict(loaded, x, verbose = 0), expected, tolerance = 1e-6)
  resaved <- withr::local_tempfile(fileext = ".keras")
  save_model(loaded, resaved)
  expect_identical(saved_trace_formats(resaved), format)
  expect_no_error(load_model(resaved))
})
