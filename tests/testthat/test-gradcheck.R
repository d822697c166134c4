test_that("gradcheck() passes a right custom gradient", {
  skip_if_no_backend()
  result <- gradcheck(new_log1pexp(), c(-2, 0, 3))
  expect_s3_class(result, c("customgrad_gradcheck", "data.frame"))
  expect_named(
    result,
    c(
      "argument",
      "elements",
      "failed",
      "max_abs_error",
      "max_rel_error",
      "worst",
      "pass"
    )
  )
  expect_true(attr(result, "pass"))
  expect_identical(result$argument, "x")
  expect_identical(result$elements, 3L)
  expect_identical(result$failed, 0L)
  expect_lt(result$max_abs_error, 1e-7)
  expect_true(result$pass)
  expect_invisible(gradcheck(new_custom_sin(), c(0.5, 1, 2), error = TRUE))
  expect_output(print(result), "<gradcheck: pass>")
})

test_that("gradcheck() catches a wrong custom gradient", {
  skip_if_no_backend()
  bad_sin <- new_custom_sin(right = FALSE)
  result <- gradcheck(bad_sin, c(0.5, 1))
  expect_false(attr(result, "pass"))
  expect_false(result$pass)
  expect_identical(result$failed, 2L)
  # The rule gives sin(x), finite differences cos(x).
  worst <- attr(result, "worst")
  expect_identical(worst$element, "x[2]")
  # Both are weighted by the same weight for x[2]: their ratio is tan(1).
  expect_equal(worst$autodiff / worst$numeric, tan(1), tolerance = 1e-6)
  expect_output(print(result), "Worst element: x\\[2\\]")
  err <- expect_error(
    gradcheck(bad_sin, c(0.5, 1), error = TRUE),
    class = "customgrad_error_gradcheck"
  )
  expect_s3_class(err$result, "customgrad_gradcheck")
  # A scalar: the weights are 1, so the values are the derivatives.
  scalar <- attr(gradcheck(bad_sin, 0.5), "worst")
  expect_equal(scalar$autodiff, sin(0.5), tolerance = 1e-10)
  expect_equal(scalar$numeric, cos(0.5), tolerance = 1e-8)
  expect_identical(scalar$element, "x")
  expect_snapshot(gradcheck(bad_sin, 0.5, error = TRUE), error = TRUE)
})

test_that("gradcheck() names the worst element of a matrix by its R index", {
  skip_if_no_backend()
  # d/dm sum(m^2) is 2 m; the rule is off at m[2, 3] only.
  off <- matrix(0, 2, 3)
  off[2, 3] <- 1
  wrong_at_2_3 <- op_custom_gradient(function(m) {
    tuple(sum(m^2), function(..., upstream = NULL) {
      (upstream %||% ..1) * (2 * m + off)
    })
  })
  m <- matrix(c(0.1, 0.2, 0.3, 0.4, 0.5, 0.6), 2)
  result <- gradcheck(wrong_at_2_3, m)
  expect_identical(result$failed, 1L)
  expect_identical(attr(result, "worst")$element, "m[2, 3]")
  expect_equal(attr(result, "worst")$numeric, 2 * m[2, 3], tolerance = 1e-8)
  expect_equal(
    attr(result, "worst")$autodiff,
    2 * m[2, 3] + 1,
    tolerance = 1e-10
  )
})

test_that("gradcheck() checks several and nested inputs", {
  skip_if_no_backend()
  f <- function(x, p) sum(p$w * exp(x)) + p$b * prod(x)
  result <- gradcheck(f, x = c(0, 1), p = list(w = c(2, 3), b = 1.5))
  expect_identical(result$argument, c("x", "p"))
  expect_identical(result$elements, c(2L, 3L))
  expect_true(attr(result, "pass"))
  # Positional inputs take f's argument names; a wrong rule deep in a list
  # is named by its path.
  wrong_w <- op_custom_gradient(function(w) {
    tuple(sin(w), function(..., upstream = NULL) (upstream %||% ..1) * w)
  })
  g <- function(x, p) sum(x * wrong_w(p$inner$w)) + p$b
  result <- gradcheck(g, c(1, 2), list(b = 3, inner = list(w = c(0.3, 0.7))))
  expect_identical(result$pass, c(TRUE, FALSE))
  expect_match(attr(result, "worst")$element, "^p\\$inner\\$w\\[[12]\\]$")
  err <- expect_error(
    gradcheck(
      g,
      c(1, 2),
      list(b = 3, inner = list(w = c(0.3, 0.7))),
      error = TRUE
    ),
    class = "customgrad_error_gradcheck"
  )
  expect_match(
    conditionMessage(err),
    "Failing input: `p` (2 of 3 elements)",
    fixed = TRUE
  )
})

test_that("gradcheck() checks functions with vector and list values", {
  skip_if_no_backend()
  expect_true(attr(
    gradcheck(function(x) list(a = exp(x), b = x^2), c(0.1, 0.2)),
    "pass"
  ))
  # A wrong rule on one output of several is caught.
  wrong_second <- op_custom_gradient(function(x) {
    tuple(list(x * 2, x^2), function(upstream) {
      upstream[[1]] * 2 + upstream[[2]] * x
    })
  })
  expect_false(attr(gradcheck(wrong_second, c(0.5, 1.5)), "pass"))
})

test_that("gradcheck() passes other inputs to f unchanged", {
  skip_if_no_backend()
  seen <- NULL
  f <- function(x, mode, n) {
    seen <<- list(mode = mode, n = n)
    sum(x^n)
  }
  result <- gradcheck(f, c(1, 2), "power", n = 3L, wrt = 1)
  expect_identical(result$argument, "x")
  expect_identical(seen, list(mode = "power", n = 3L))
  # By default only the numeric inputs are checked.
  result <- gradcheck(f, c(1, 2), "power", 3)
  expect_identical(result$argument, c("x", "n"))
})

test_that("gradcheck() computes in float64 and restores the backend's settings", {
  skip_if_no_backend()
  before <- float64_state()
  seen <- NULL
  f <- function(x) {
    seen <<- op_dtype(sin(x))
    sum(sin(x))
  }
  result <- gradcheck(f, op_convert_to_tensor(c(0.5, 1)))
  expect_identical(seen, "float64")
  # In float64 the errors are far below float32's precision.
  expect_lt(result$max_abs_error, 1e-8)
  expect_identical(float64_state(), before)
  # also after an error inside f
  failing <- function(x) rlang::abort("f failed on purpose", class = "my_error")
  expect_error(gradcheck(failing, 1), class = "my_error")
  expect_identical(float64_state(), before)
})

test_that("gradcheck() shows progress for long checks", {
  skip_if_no_backend()
  withr::local_options(cli.progress_show_after = 0, cli.dynamic = FALSE)
  x <- seq(0.1, 6, length.out = 60)
  messages <- capture_messages(result <- gradcheck(function(x) sum(sin(x)), x))
  expect_true(any(grepl("Checking gradients", messages)))
  expect_true(attr(result, "pass"))
  expect_identical(result$elements, 60L)
})

test_that("gradcheck() arguments are checked", {
  skip_if_no_backend()
  f <- function(x) sum(x)
  expect_snapshot(gradcheck(f), error = TRUE)
  expect_snapshot(gradcheck(f, 1, eps = 0), error = TRUE)
  expect_error(
    gradcheck(f, 1, atol = -1),
    class = "customgrad_error_bad_argument"
  )
  expect_error(
    gradcheck(f, 1, error = NA),
    class = "customgrad_error_bad_argument"
  )
  expect_error(gradcheck("f", 1), class = "customgrad_error_not_function")
  expect_snapshot(gradcheck(f, 1, wrt = 2), error = TRUE)
  expect_snapshot(gradcheck(f, "a", wrt = 1), error = TRUE)
  expect_error(gradcheck(f, "a"), class = "customgrad_error_gradcheck_input")
})

test_that("gradcheck() prints one readable row per input, with the worst element", {
  skip_if_no_backend()
  bad_sin <- op_custom_gradient(function(x) {
    tuple(sin(x), function(upstream) upstream * sin(x))
  })
  # y enters as 0 * y: its numeric derivative is exactly 0, where only the
  # absolute error means anything (no Inf relative error).
  f <- function(x, y) op_sum(bad_sin(x)) + op_sum(y * 0)
  result <- gradcheck(f, x = c(0, 1), y = c(2, 3))
  expect_identical(result$worst, c("x[1]", "y[1]"))
  expect_identical(result$max_rel_error[[2]], NA_real_)
  expect_false(any(is.infinite(result$max_rel_error)))
  expect_snapshot(print(result), transform = function(lines) {
    gsub("[0-9]\\.[0-9]+e-[0-9]+", "<tiny>", lines)
  })
})
