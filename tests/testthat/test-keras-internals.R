# The Keras internals customgrad relies on from R: the Python class names
# that its S3 methods and checks are registered for (keras-internals.R),
# and the graph that keras3's op_*() calls record, which replay reads
# (inst/python/customgrad/_keras_internals.py; pytest checks the rest).

# Fails naming the class and the Keras version when `object` is not of it.
expect_keras_class <- function(object, class, what) {
  version <- reticulate::import("keras")$`__version__`
  expect(
    inherits(object, class),
    sprintf(
      "Keras %s no longer makes %s of the Python class %s that customgrad's R code names (R/keras-internals.R); its classes are: %s.",
      version,
      what,
      class,
      paste(class(object), collapse = ", ")
    )
  )
}

test_that("R's Keras class names are the installed Keras' classes", {
  skip_if_no_backend()
  keras <- reticulate::import("keras")
  expect_keras_class(
    keras$KerasTensor(shape(2L, 3L)),
    customgrad:::keras_tensor_class,
    "symbolic tensors"
  )
  expect_keras_class(
    keras_model_sequential(input_shape = 3),
    customgrad:::keras_sequential_class,
    "Sequential models"
  )
  inputs <- keras_input(3)
  for (model in list(
    keras_model_sequential(input_shape = 3),
    keras_model(inputs, inputs |> layer_dense(1))
  )) {
    expect_keras_class(model, customgrad:::keras_model_class, "models")
  }
  expect_keras_class(
    keras$Variable(1),
    customgrad:::keras_variable_class,
    "variables"
  )
  backend <- config_backend()
  if (backend %in% names(customgrad:::keras_variable_classes)) {
    expect_keras_class(
      keras$Variable(1),
      customgrad:::keras_variable_classes[[backend]],
      "variables"
    )
  }
})

test_that("keras3's op_*() calls on symbolic tensors record the calls replay reads", {
  skip_if_no_backend()
  internals <- customgrad:::customgrad_py("_keras_internals")
  x <- keras_input(shape = 3)
  y <- op_exp(x) + 1
  call <- internals$producing_call(y)
  expect_identical(internals$arithmetic(call$operation), "add")
  exp_call <- internals$producing_call(call$inputs[[1]])
  expect_null(internals$arithmetic(exp_call$operation))
  expect_identical(
    reticulate::py_id(exp_call$inputs[[1]]),
    reticulate::py_id(x)
  )
})
