# TensorFlow only: export.

test_that("on TensorFlow, model$export() works and serves the same predictions", {
  skip_if_no_backend()
  expect_export_predicts_same()
})
