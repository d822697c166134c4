# One converter from R values to tensors (R/inputs.R): h(), op_grad(),
# op_compile() and gradcheck() take the same values, with the same errors.

new_routes <- function() {
  h <- op_custom_gradient(function(x) {
    tuple(x * 10, function(upstream) upstream * 10)
  })
  list(
    h = h,
    op_grad = op_grad(function(x) op_sum(h(x))),
    op_compile = op_compile(function(x) x * 10)
  )
}

test_that("every route rejects the same values with the same classes", {
  skip_if_no_backend()
  cases <- list(
    "NA" = list(NA, "customgrad_error_na"),
    "NA in a double vector" = list(c(1, NA), "customgrad_error_na"),
    "NA in a list" = list(list(1, NA_real_), "customgrad_error_na"),
    "factor" = list(factor("a"), "customgrad_error_input"),
    "data frame" = list(data.frame(a = 1:2), "customgrad_error_input"),
    "complex" = list(1i, "customgrad_error_input")
  )
  for (route in names(new_routes())) {
    fn <- new_routes()[[route]]
    for (case in names(cases)) {
      expect_error(
        fn(cases[[case]][[1]]),
        class = cases[[case]][[2]],
        label = paste(route, case)
      )
    }
  }
})

test_that("empty inputs are tensors of shape (0) on every route", {
  skip_if_no_backend()
  shape_of <- function(x) as.integer(keras3::op_shape(x))
  routes <- new_routes()
  expect_tensor(routes$h(numeric(0)), numeric(0))
  expect_identical(shape_of(routes$h(numeric(0))), 0L)
  expect_identical(shape_of(routes$op_grad(numeric(0))), 0L)
  expect_identical(
    shape_of(routes$op_compile(numeric(0))),
    0L
  )
  expect_identical(
    shape_of(routes$h(matrix(numeric(0), 0, 3))),
    c(0L, 3L)
  )
})

test_that("integers and logicals follow one rule", {
  skip_if_no_backend()
  identity_h <- op_custom_gradient(function(x) {
    tuple(x, function(upstream) NULL)
  })
  identity_c <- op_compile(function(x) x)
  for (fn in list(identity_h, identity_c)) {
    expect_identical(keras3::op_dtype(fn(1:3)), "int32")
    expect_identical(keras3::op_dtype(fn(c(TRUE, FALSE))), "bool")
  }
  # Differentiated, an R integer is a number; a logical can't be.
  expect_tensor(op_grad(function(x) op_sum(x * x))(1:2), c(2, 4))
  expect_error(
    op_grad(function(x) op_sum(x))(c(TRUE, FALSE)),
    class = "customgrad_error_input"
  )
  expect_snapshot(op_grad(function(x) op_sum(x))(c(TRUE, FALSE)), error = TRUE)
})

test_that("a single integer or logical is an option only for h()", {
  skip_if_no_backend()
  seen <- NULL
  h <- op_custom_gradient(function(x, k) {
    seen <<- k
    tuple(x * 2, function(upstream) upstream * 2)
  })
  h(1, 3L)
  expect_identical(seen, 3L)
  expect_identical(
    keras3::op_dtype(op_compile(function(x) x)(3L)),
    "int32"
  )
})
