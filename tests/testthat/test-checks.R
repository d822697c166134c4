# The input checkers: each returns its input or signals its classed error,
# naming the argument as the caller wrote it.

test_that("describe_object() says what a value is, briefly", {
  expect_identical(customgrad:::describe_object(NULL), "NULL")
  expect_identical(
    customgrad:::describe_object(1:3),
    "an integer vector of length 3"
  )
  expect_identical(
    customgrad:::describe_object(list(1, 2, 3)),
    "a list of length 3"
  )
  expect_identical(customgrad:::describe_object(list()), "an empty list")
  expect_identical(customgrad:::describe_object(2.5), "a number (2.5)")
  expect_identical(customgrad:::describe_object("a"), 'a string ("a")')
  expect_identical(customgrad:::describe_object(function(x) x), "a function")
  skip_if_no_backend()
  expect_identical(
    customgrad:::describe_object(keras3::op_ones(c(2, 3))),
    "a float32 tensor of shape (2, 3)"
  )
  symbolic <- keras3::keras_input(shape = 4)
  expect_identical(
    customgrad:::describe_object(symbolic),
    "a float32 tensor of shape (?, 4)"
  )
})

test_that("checkers return their input and name the caller's argument", {
  check_function <- customgrad:::check_function
  expect_identical(check_function(sin), sin)
  my_fun <- function(g) check_function(g)
  err <- expect_error(my_fun(1), class = "customgrad_error_not_function")
  expect_match(conditionMessage(err), "`g` must be a function", fixed = TRUE)
  expect_identical(err$call, quote(my_fun(1)))
  expect_identical(customgrad:::check_flag("strict", strict = TRUE), "strict")
  expect_error(
    customgrad:::check_flag(NA, strict = TRUE),
    class = "customgrad_error_trace_arg"
  )
  expect_identical(customgrad:::check_flag(TRUE), TRUE)
  expect_error(
    customgrad:::check_flag(NA),
    class = "customgrad_error_bad_argument"
  )
  expect_identical(customgrad:::check_tolerance(0, zero = TRUE), 0)
  expect_error(
    customgrad:::check_tolerance(0),
    class = "customgrad_error_bad_argument"
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
