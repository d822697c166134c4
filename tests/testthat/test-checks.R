# The input checkers: each returns its input or signals its classed error,
# naming the argument as the caller wrote it.

test_that("an argument's error says briefly what the value is", {
  it_is <- function(x) {
    err <- expect_error(
      op_custom_gradient(x),
      class = "customgrad_error_not_function"
    )
    sub("^.*It is (.*)\\.$", "\\1", cli::ansi_strip(conditionMessage(err)))
  }
  expect_identical(it_is(NULL), "NULL")
  expect_identical(it_is(1:3), "an integer vector of length 3")
  expect_identical(it_is(list(1, 2, 3)), "a list of length 3")
  expect_identical(it_is(list()), "an empty list")
  expect_identical(it_is(2.5), "a number (2.5)")
  expect_identical(it_is("a"), 'a string ("a")')
  err <- expect_error(
    gradcheck(sin, 1, eps = function(x) x),
    class = "customgrad_error_bad_argument"
  )
  expect_match(conditionMessage(err), "It is a function.", fixed = TRUE)
  skip_if_no_backend()
  expect_identical(
    it_is(keras3::op_ones(c(2, 3))),
    "a float32 tensor of shape (2, 3)"
  )
  expect_identical(
    it_is(keras3::keras_input(shape = 4)),
    "a float32 tensor of shape (?, 4)"
  )
})

test_that("checkers name the caller's argument and call", {
  err <- expect_error(op_grad(1), class = "customgrad_error_not_function")
  expect_match(conditionMessage(err), "`f` must be a function", fixed = TRUE)
  expect_identical(err$call, quote(op_grad(1)))
  expect_error(op_grad(sin, trace = NA), class = "customgrad_error_trace_arg")
  expect_error(
    op_compile(sin, trace = "yes"),
    class = "customgrad_error_trace_arg"
  )
  expect_no_error(op_compile(sin, trace = "strict"))
  err <- expect_error(
    gradcheck(sin, 1, error = NA),
    class = "customgrad_error_bad_argument"
  )
  expect_match(conditionMessage(err), "`error` must be", fixed = TRUE)
  err <- expect_error(
    gradcheck(sin, 1, eps = 0),
    class = "customgrad_error_bad_argument"
  )
  expect_match(
    conditionMessage(err),
    "`eps` must be a finite number greater than 0",
    fixed = TRUE
  )
  err <- expect_error(
    gradcheck(sin, 1, atol = -1),
    class = "customgrad_error_bad_argument"
  )
  expect_match(
    conditionMessage(err),
    "`atol` must be a finite number, 0 or more",
    fixed = TRUE
  )
})

test_that("an unknown backend name gets rlang's suggestion and customgrad's class", {
  expect_identical(customgrad:::check_backend("jax"), "jax")
  err <- expect_error(
    customgrad:::check_backend("jaxx", arg = "backend"),
    class = "customgrad_error_backend_unknown"
  )
  expect_s3_class(err, "customgrad_error")
  expect_match(conditionMessage(err), "must be one of")
  expect_match(conditionMessage(err), "jax")
})

test_that("every check_*() helper has the house signature", {
  ns <- asNamespace("customgrad")
  checkers <- grep("^check_", ls(ns, all.names = TRUE), value = TRUE)
  expect_gt(length(checkers), 10)
  for (name in checkers) {
    fmls <- names(formals(get(name, envir = ns)))
    expect_identical(fmls[[1]], "x", label = name)
    expect_true(all(c("...", "call") %in% fmls), label = name)
  }
})
