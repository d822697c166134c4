log1pexp <- op_custom_gradient(\(x) {
  e <- op_exp(x)
  grad <- function(..., upstream = NULL) {
    upstream <- upstream %||% ..1
    op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
  }
  tuple(op_log(1 + e), grad)
})

test_that("log1pexp: value and a gradient of exactly 1 at x = 100", {
  skip_if_no_backend()
  expect_tensor(log1pexp(2), log1p(exp(2)))
  expect_equal(native_grad(log1pexp, 100), array(1))
  expect_equal(native_grad(log1pexp, c(0, 1)), array(plogis(c(0, 1))), tolerance = 1e-6)
  # The naive formula's gradient is NaN there: the custom one is needed.
  naive <- function(x) op_log(1 + op_exp(x))
  expect_true(is.nan(native_grad(naive, 100)))
})

test_that("op_custom_gradient() returns a function with f's arguments", {
  h <- op_custom_gradient(function(x, y = 2) tuple(x, function(upstream) upstream))
  expect_identical(names(formals(h)), c("x", "y"))
  expect_error(op_custom_gradient(1), class = "customgrad_error_not_function")
  expect_snapshot(op_custom_gradient("f"), error = TRUE)
})

test_that("tuple() is a plain R list underneath", {
  t <- tuple(1, function(x) x)
  expect_true(is.list(t))
  expect_length(t, 2)
  expect_true(is.function(t[[2]]))
  expect_output(print(tuple(1)), "<tuple of 1>")
})
