test_that("op_compile() runs R once per signature on every backend", {
  skip_if_no_backend()
  runs <- 0
  f <- function(x, y) {
    runs <<- runs + 1
    sum(exp(x) * y)
  }
  fc <- op_compile(f)
  expect_identical(names(formals(fc)), c("x", "y"))
  for (i in 1:4) {
    x <- c(i, i + 1) / 10
    expect_tensor(fc(x, c(2, 3)), sum(exp(x) * c(2, 3)), tolerance = 1e-6)
  }
  expect_identical(runs, 1)
  # A new input shape is traced again.
  runs <- 0
  expect_tensor(
    fc(c(0.1, 0.2, 0.3), c(1, 1, 1)),
    sum(exp(c(0.1, 0.2, 0.3))),
    tolerance = 1e-6
  )
  fc(c(0.4, 0.5, 0.6), c(1, 1, 1))
  expect_identical(runs, 1)
  # Named in another order: R matches them to f's arguments, the same call.
  runs <- 0
  swapped <- fc(y = c(1, 1, 1), x = c(0.1, 0.2, 0.3))
  expect_tensor(swapped, sum(exp(c(0.1, 0.2, 0.3))), tolerance = 1e-6)
  expect_identical(runs, 0)
  # Through `...`, names are part of the signature.
  dots <- op_compile(function(...) {
    runs <<- runs + 1
    list(...)$a * 2
  })
  expect_tensor(dots(a = 1, b = 5), 2)
  expect_tensor(dots(b = 1, a = 5), 10)
  expect_identical(runs, 2)
})

test_that("op_compile() of op_grad() is a compiled gradient", {
  skip_if_no_backend()
  runs <- 0
  f <- function(x) {
    runs <<- runs + 1
    sum(sin(x) * x)
  }
  g <- op_compile(op_grad(f))
  for (i in 1:3) {
    x <- c(0.5, 1) * i
    expect_tensor(g(x), cos(x) * x + sin(x), tolerance = 1e-5)
  }
  # op_grad() traces f once, even where op_compile() runs eagerly (torch).
  expect_identical(runs, 1)
  # Custom gradients run inside compiled functions too.
  dlog1pexp <- op_compile(op_grad(new_log1pexp()))
  expect_tensor(dlog1pexp(100), 1)
  expect_tensor(dlog1pexp(0), 0.5)
})

test_that("op_compile() keeps nested lists, names and argument names", {
  skip_if_no_backend()
  f <- function(x, p) {
    list(z = sin(x) * p$scale, a = p$shift, both = list(x, p$shift))
  }
  fc <- op_compile(f)
  p <- list(scale = 2, shift = c(1, 2))
  out <- fc(c(0.5, 1), p)
  expect_named(out, c("z", "a", "both"))
  expect_tensor(out$z, 2 * sin(c(0.5, 1)), tolerance = 1e-6)
  expect_tensor(out$a, c(1, 2))
  expect_length(out$both, 2)
  # Tensors come back as keras3 hands them out: conversion on.
  expect_identical(out$z$ndim, 1L)
  # Named arguments, in any order; an argument called `x` too.
  expect_tensor(
    fc(p = p, x = c(0.5, 1))$z,
    2 * sin(c(0.5, 1)),
    tolerance = 1e-6
  )
  # R integers and logicals keep their type.
  out <- op_compile(function(i, b) list(i * 2L, b))(1:3, c(TRUE, FALSE))
  expect_identical(op_dtype(out[[1]]), "int32")
  expect_identical(op_dtype(out[[2]]), "bool")
  expect_equal(as.vector(as.array(out[[1]])), c(2L, 4L, 6L))
})

test_that("errors in f reach the caller of a compiled function", {
  skip_if_no_backend()
  fc <- op_compile(function(x) {
    rlang::abort("f failed on purpose", class = "my_error")
  })
  expect_error(fc(1), "f failed on purpose", class = "my_error")
  expect_snapshot(op_compile(1), error = TRUE)
  fc <- op_compile(function(x) x)
  expect_snapshot(fc("a"), error = TRUE)
  expect_error(fc(list(1, "a")), class = "customgrad_error_input")
})

test_that("a compiled function prints what it compiles", {
  expect_snapshot(op_compile(sin))
})

test_that("customgrad's errors about a wrapped function without a name name the compiled call, not f()", {
  skip_if_no_backend()
  double_it <- function(x) x * 2
  err <- expect_error(
    op_compile(op_grad(double_it))(c(1, 2)),
    class = "customgrad_error_not_scalar"
  )
  expect_equal(
    conditionCall(err),
    quote(op_compile(op_grad(double_it))(c(1, 2)))
  )
  # A function the user named is named.
  g <- op_grad(double_it)
  err <- expect_error(
    op_compile(g)(c(1, 2)),
    class = "customgrad_error_not_scalar"
  )
  expect_equal(conditionCall(err), quote(g(x = x)))
  # The user's own errors name the user's function.
  err <- expect_error(op_compile(\(x) stop("boom"))(1), "boom")
  expect_equal(conditionCall(err), quote(f(x = x)))
})

test_that("an f that can't be traced runs in R at every call after one message; with trace = FALSE, when the backend compiles it", {
  skip_if_no_backend()
  calls <- 0
  noisy <- function(x) {
    calls <<- calls + 1
    x * 2 + stats::runif(1)
  }
  fc <- op_compile(noisy)
  # R's own draws, as R would make them calling noisy() itself.
  draws <- withr::with_seed(2, stats::runif(2))
  withr::local_seed(2)
  expect_message(
    first <- fc(c(1, 2)),
    "`op_compile\\(noisy\\)` could not be traced.*at every call.*call `f` itself.*backend compile",
    class = "customgrad_message_fallback"
  )
  expect_tensor(first, c(2, 4) + draws[[1]], tolerance = 1e-6)
  expect_equal(calls, 2) # the failed trace and R's run
  expect_no_message(second <- fc(c(3, 4)))
  expect_tensor(second, c(6, 8) + draws[[2]], tolerance = 1e-6)
  expect_equal(calls, 3)
  expect_error(
    op_compile(noisy, trace = "strict")(1),
    class = "customgrad_error_trace"
  )
  # trace = FALSE: the backend's compiler runs R's code, as it would run
  # Python's; on PyTorch, which compiles nothing, R runs at every call.
  calls <- 0
  untraced <- op_compile(noisy, trace = FALSE)
  expect_no_message(a <- as.array(untraced(c(1, 2))))
  b <- as.array(untraced(c(1, 2)))
  compiles <- config_backend() != "torch"
  expect_equal(calls, if (compiles) 1 else 2)
  expect_identical(isTRUE(all.equal(a, b)), compiles)
})

test_that("a replay the backend's compiler refuses runs eagerly, with eager's values", {
  skip_if_no_backend()
  # jax.jit refuses op_bincount() without a static length (its value's
  # shape depends on values): a raw ConcretizationTypeError from JAX.
  runs <- 0
  counts <- op_compile(function(x) {
    runs <<- runs + 1
    op_bincount(op_cast(x, "int32"))
  })
  expect_tensor(counts(c(0, 1, 0, 2)), c(2, 1, 1))
  expect_tensor(counts(c(2, 2, 0, 3)), c(1, 0, 2, 1))
  expect_equal(runs, 1) # the replay runs eagerly, not R
})

test_that("a compiled function whose R value read from outside changed runs R from then on", {
  skip_if_no_backend()
  scale <- 2
  runs <- 0
  fc <- op_compile(function(x) {
    runs <<- runs + 1
    x * scale
  })
  expect_tensor(fc(c(1, 2)), c(2, 4))
  expect_tensor(fc(c(1, 2)), c(2, 4))
  expect_equal(runs, 1)
  scale <- 3
  expect_message(
    expect_tensor(fc(c(1, 2)), c(3, 6)),
    "reads `scale` from outside its arguments.*call `f` itself.*backend compile",
    class = "customgrad_message_fallback"
  )
  scale <- 5
  expect_no_message(expect_tensor(fc(c(1, 2)), c(5, 10)))
  expect_equal(runs, 3)
})

test_that("a compiled function reads the Keras variables it captures at every call", {
  skip_if_no_backend()
  # On JAX, jax.jit fixed a variable's value into the trace: after
  # $assign(), calls kept the old value.
  v <- keras_variable(2)
  w <- keras_variable(c(1, 1))
  runs <- 0
  fc <- op_compile(function(x) {
    runs <<- runs + 1
    op_sum(op_add(op_multiply(x, v), w))
  })
  expect_tensor(fc(c(1, 2)), 8)
  v$assign(5)
  expect_tensor(fc(c(1, 2)), 17)
  w$assign(c(2, 3))
  expect_tensor(fc(c(1, 2)), 20)
  expect_identical(runs, 1)
  g <- op_compile(op_grad(function(x) op_sum(op_multiply(x * x, v))))
  expect_tensor(g(c(1, 2)), c(10, 20))
  v$assign(1)
  expect_tensor(g(c(1, 2)), c(2, 4))
  # R's f itself under the backend's compiler (not traced by customgrad).
  untraced <- op_compile(function(x) op_multiply(x, v), trace = FALSE)
  expect_tensor(untraced(c(1, 2)), c(1, 2))
  v$assign(3)
  expect_tensor(untraced(c(1, 2)), c(3, 6))
})

test_that("a compiled dropout layer draws a new mask at every call", {
  skip_if_no_backend()
  # Its seed generator's state is a variable the replay reads and assigns.
  dropout <- layer_dropout(rate = 0.5)
  fc <- op_compile(function(x) dropout(x, training = TRUE))
  masks <- lapply(1:3, function(i) as.array(fc(op_ones(c(64)))))
  expect_true(all(unlist(masks) %in% c(0, 2)))
  expect_false(identical(masks[[2]], masks[[3]]))
})
