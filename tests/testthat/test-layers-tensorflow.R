# TensorFlow only: export.

test_that("on TensorFlow, model$export() works and serves the same predictions", {
  skip_if_no_backend()
  model <- three_layer_model(\(x) {
    x |>
      layer_custom_gradient(counted_log1pexp(new.env())) |>
      layer_gradient_scale(2)
  })
  x <- matrix(seq(-1, 1, length.out = 6), ncol = 3)
  dir <- withr::local_tempfile()
  model$export(dir, format = "tf_saved_model", verbose = FALSE)
  tf <- reticulate::import("tensorflow")
  served <- tf$saved_model$load(dir)$serve(op_convert_to_tensor(x, "float32"))
  expect_equal(
    as.array(served$numpy()),
    predict(model, x, verbose = 0),
    tolerance = 1e-6
  )
})
