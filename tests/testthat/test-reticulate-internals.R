# What R/reticulate-internals.R reads of reticulate: it fails when a
# reticulate release changes it.

test_that("keras3's tuple() gives back the R function of grad, formals and all", {
  skip_if_no_backend()
  grad <- function(x, upstream = NULL, variables = NULL) upstream * x
  result <- customgrad:::as_f_result(keras3::tuple(1, grad))
  expect_identical(result[[2]], grad)
  expect_named(formals(result[[2]]), c("x", "upstream", "variables"))
})

test_that("a Python function that wraps no R function is kept as it is", {
  skip_if_no_backend()
  identity_py <- reticulate::py_eval("lambda x: x", convert = FALSE)
  expect_identical(customgrad:::r_function_in(identity_py), identity_py)
})
