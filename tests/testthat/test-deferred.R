# Deferred ops: inside f and grad, ops are recorded and run in Python when
# the function returns. Every result must be what eager ops give.

test_that("ops inside f are recorded, and outside f they run at once", {
  skip_if_no_backend()
  seen <- NULL
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x)
    seen <<- class(e)
    tuple(e * 2, function(upstream) upstream * e * 2)
  })
  expect_tensor(h(c(0, 1)), 2 * exp(c(0, 1)))
  expect_identical(seen, "customgrad_deferred")
  expect_true(inherits(op_exp(1), "python.builtin.object"))
  expect_equal(
    as.vector(native_grad(h, c(0, 1))),
    2 * exp(c(0, 1)),
    tolerance = 1e-6
  )
})

test_that("recorded and eager ops give the same values and gradients", {
  skip_if_no_backend()
  f <- function(x, y) {
    s <- op_sum(x * y, axis = 1L)
    m <- op_matmul(op_transpose(x), op_tanh(y))
    value <- op_mean(m) + op_max(s) - op_sqrt(op_square(s[1]) + 1)
    grad <- function(upstream) {
      list(
        upstream * op_cos(x) / 2,
        upstream * op_sigmoid(y) - 1 / (1 + op_abs(y))
      )
    }
    tuple(value, grad)
  }
  x <- matrix(c(0.5, -1, 2, 0.25, 3, -0.5), 2)
  y <- matrix(c(1, 2, -3, 0.5, 0.1, -2), 2)
  deferred <- op_value_and_grad(op_custom_gradient(f), wrt = 1:2)(x, y)
  eager <- withr::with_options(
    list(customgrad.defer_ops = FALSE),
    op_value_and_grad(op_custom_gradient(f), wrt = 1:2)(x, y)
  )
  expect_equal(
    as.vector(deferred[[1]]),
    as.vector(eager[[1]]),
    tolerance = 1e-6
  )
  expect_equal(
    as.array(deferred[[2]][[1]]),
    as.array(eager[[2]][[1]]),
    tolerance = 1e-6
  )
  expect_equal(
    as.array(deferred[[2]][[2]]),
    as.array(eager[[2]][[2]]),
    tolerance = 1e-6
  )
  expect_equal(as.array(eager[[2]][[1]]), cos(x) / 2, tolerance = 1e-6)
})

test_that("a recorded op's value can be read inside f", {
  skip_if_no_backend()
  seen <- list()
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x) + 1
    seen$dim <<- dim(e)
    seen$values <<- as.array(e)
    seen$shape <<- e$shape
    seen$printed <<- utils::capture.output(print(e))
    # a value read in R decides what happens next
    scale <- if (sum(as.array(e)) > 3) 2 else 3
    tuple(e * scale, function(upstream) upstream * op_exp(x) * scale)
  })
  expect_tensor(h(c(0, 1)), 2 * (exp(c(0, 1)) + 1))
  expect_identical(seen$dim, 2L)
  expect_equal(as.vector(seen$values), exp(c(0, 1)) + 1, tolerance = 1e-6)
  expect_false(is.null(seen$shape))
  expect_match(seen$printed[[1]], "tensor, shape \\(2\\)")
  expect_equal(
    as.vector(native_grad(h, c(0, 1))),
    2 * exp(c(0, 1)),
    tolerance = 1e-6
  )
})

test_that("ops that are not recorded take recorded inputs", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x) - 2
    clipped <- op_where(e > 0, e, 0) # op_where runs at once
    tuple(clipped + op_cumsum(e), function(upstream) upstream * op_exp(x))
  })
  x <- c(0, 1, 2)
  e <- exp(x) - 2
  expect_tensor(h(x), ifelse(e > 0, e, 0) + cumsum(e), tolerance = 1e-5)
})

test_that("a recorded op that escapes f keeps its value", {
  skip_if_no_backend()
  kept <- NULL
  h <- op_custom_gradient(function(x) {
    kept <<- op_exp(x) * 3
    tuple(x, function(upstream) upstream)
  })
  h(c(0, 1))
  expect_s3_class(kept, "customgrad_deferred")
  expect_equal(as.vector(kept), 3 * exp(c(0, 1)), tolerance = 1e-5)
  expect_tensor(op_add(kept, 1), 3 * exp(c(0, 1)) + 1, tolerance = 1e-5)
  expect_tensor(reticulate::r_to_py(kept), 3 * exp(c(0, 1)), tolerance = 1e-5)
})

test_that("a failing recorded op is a classed error naming the op", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(op_matmul(x, op_ones(c(3L, 3L))), function(upstream) upstream)
  })
  x <- matrix(1, 2, 2)
  err <- expect_error(h(x), class = "customgrad_error_op")
  expect_match(conditionMessage(err), "op_matmul()", fixed = TRUE)
  expect_match(conditionMessage(err), "customgrad.defer_ops", fixed = TRUE)
  # Not deferred, the op fails where it is written.
  withr::local_options(customgrad.defer_ops = FALSE)
  expect_error(h(x))
  expect_no_error(tryCatch(h(x), error = function(cnd) {
    expect_false(inherits(cnd, "customgrad_error_op"))
  }))
})

test_that("grad recorded during forward gives the gradient without R", {
  skip_if_no_backend()
  calls <- 0
  handles <- customgrad:::the$grad_handle
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x)
    tuple(op_log(1 + e), function(upstream) {
      calls <<- calls + 1
      upstream * (1 - 1 / (1 + e))
    })
  })
  expect_equal(
    as.vector(native_grad(h, c(-1, 0, 100))),
    c(plogis(-1), 0.5, 1),
    tolerance = 1e-6
  )
  # grad ran once, whether recorded ahead or called in backward
  expect_identical(calls, 1)
  # and, recorded, it left no R callback waiting for the backward pass
  expect_identical(customgrad:::the$grad_handle, handles)
})

test_that("grad that needs upstream's value runs in the backward pass", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) {
      # a value read in R: upstream must be real here
      if (sum(as.array(upstream)) > 0) upstream * 2 else upstream * 0
    })
  })
  if (config_backend() == "jax") {
    # JAX runs grad while tracing: upstream never has a value in R there.
    expect_error(native_grad(h, c(1, 2)), "symbolic tensor")
  } else {
    expect_equal(as.vector(native_grad(h, c(1, 2))), c(2, 2))
  }
})

test_that("an error in grad surfaces in the backward pass, not in forward", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) {
      rlang::abort("grad failed on purpose", class = "my_grad_error")
    })
  })
  expect_tensor(h(c(1, 2)), c(2, 4))
  expect_error(
    op_grad(function(x) op_sum(h(x)))(c(1, 2)),
    "grad failed on purpose",
    class = "my_grad_error"
  )
})

test_that("f's values that grad uses are those of the same call", {
  skip_if_no_backend()
  h <- new_log1pexp()
  g <- op_grad(function(x, y) op_sum(h(x)) + op_sum(h(y) * 3))
  grads <- g(c(-2, 0), c(1, 5))
  expect_equal(as.vector(grads), plogis(c(-2, 0)), tolerance = 1e-6)
  both <- op_grad(function(x, y) op_sum(h(x)) + op_sum(h(y) * 3), wrt = 1:2)(
    c(-2, 0),
    c(1, 5)
  )
  expect_equal(as.vector(both[[2]]), 3 * plogis(c(1, 5)), tolerance = 1e-6)
})

test_that("R functions that Python calls inside f run their ops at once", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x)
    # op_map() calls the R function from Python, on slices of e
    doubled <- op_map(e, function(v) {
      expect_true(inherits(v * 2, "python.builtin.object"))
      v * 2
    })
    tuple(doubled + 1, function(upstream) upstream * 2 * op_exp(x))
  })
  expect_tensor(h(c(0, 1, 2)), 2 * exp(c(0, 1, 2)) + 1, tolerance = 1e-5)
  expect_equal(
    as.vector(native_grad(h, c(0, 1))),
    2 * exp(c(0, 1)),
    tolerance = 1e-5
  )
})

test_that("every recorded op is a keras.ops function", {
  skip_if_no_backend()
  ops <- reticulate::import("keras.ops", convert = FALSE)
  missing <- Filter(
    function(name) !reticulate::py_has_attr(ops, name),
    customgrad:::deferrable_ops
  )
  expect_identical(missing, character())
})
