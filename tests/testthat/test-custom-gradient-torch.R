# PyTorch's own conventions: backward(), create_graph, one output per grad
# in keras' wrapper (not in customgrad's), no silent NaN gradients.

test_that("several outputs work on torch (keras' own wrapper takes one)", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  h <- op_custom_gradient(function(x) {
    tuple(list(x * 2, x^2), function(upstream) {
      upstream[[1]] * 2 + upstream[[2]] * 2 * x
    })
  })
  x <- torch$tensor(c(1, 3), requires_grad = TRUE)
  out <- h(x)
  (out[[1]]$sum() + out[[2]]$sum())$backward()
  expect_values(as.array(x$grad), 2 + 2 * c(1, 3))
})

test_that("an f that returns only a value fails instead of training on NaN", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  calls <- 0
  h <- op_custom_gradient(function(x) {
    calls <<- calls + 1
    x * 2
  })
  x <- torch$tensor(1, requires_grad = TRUE)
  expect_error(h(x), class = "customgrad_error_f_result")
  expect_identical(calls, 1) # not run a second time behind the error
  expect_true(reticulate::py_eval("lambda t: t.grad is None")(x))
})

test_that("create_graph = TRUE differentiates the gradient again", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  cube <- op_custom_gradient(function(x) {
    tuple(x^3, function(..., upstream) upstream * 3 * ..1^2)
  })
  x <- torch$tensor(c(1, 2), requires_grad = TRUE)
  dy <- reticulate::py_to_r(torch$autograd$grad(
    cube(x)$sum(),
    x,
    create_graph = TRUE
  ))[[1]]
  expect_values(as.array(dy$detach()), 3 * c(1, 2)^2)
  d2y <- reticulate::py_to_r(torch$autograd$grad(dy$sum(), x))[[1]]
  expect_values(as.array(d2y), 6 * c(1, 2))
})

test_that("backward leaves the inputs' other gradients alone", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  h <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(upstream) list(upstream * y, NULL))
  })
  x <- torch$tensor(c(1, 2), requires_grad = TRUE)
  y <- torch$tensor(c(3, 4), requires_grad = TRUE)
  h(x, y)$sum()$backward()
  expect_values(as.array(x$grad), c(3, 4))
  expect_true(reticulate::py_eval("lambda t: t.grad is None")(y))
})

test_that("f's values saved for backward serve a retained graph twice", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  h <- op_custom_gradient(function(x) {
    e <- op_exp(x)
    tuple(op_log(1 + e), function(upstream) upstream * (1 - 1 / (1 + e)))
  })
  x <- torch$tensor(c(-1, 0, 2), requires_grad = TRUE)
  y <- h(x)$sum()
  y$backward(retain_graph = TRUE)
  first <- as.vector(x$grad)
  y$backward()
  expect_equal(first, plogis(c(-1, 0, 2)), tolerance = 1e-6)
  expect_equal(as.vector(x$grad), 2 * plogis(c(-1, 0, 2)), tolerance = 1e-6)
  # Without retain_graph, the saved values are gone: torch's own error.
  y2 <- h(x)$sum()
  y2$backward()
  expect_error(y2$backward(), "second time")
})

test_that("op_grad() results carry no autograd graph unless an outer differentiation needs one", {
  skip_unless_backend("torch")
  torch <- reticulate::import("torch", convert = FALSE)
  holds_graph <- reticulate::py_eval(
    "lambda t: t.requires_grad or t.grad_fn is not None"
  )
  h <- new_log1pexp()
  g <- op_grad(\(v) op_sum(h(v)))
  # A plain input: R may hold the gradient until its collector runs, and
  # it must not keep the step's graph (and its saved tensors) alive.
  grad <- g(op_convert_to_tensor(c(0, 1), "float32"))
  expect_tensor(grad, plogis(c(0, 1)), tolerance = 1e-6)
  expect_false(holds_graph(grad))
  # An input with history: the gradient is differentiable again.
  x <- torch$tensor(c(0, 1), requires_grad = TRUE)
  grad <- g(x)
  expect_true(holds_graph(grad))
  grad$sum()$backward()
  s <- plogis(c(0, 1))
  expect_values(as.array(x$grad), s * (1 - s), tolerance = 1e-6)
  # Inside another op_grad(), differentiated through what f closes over.
  dx <- op_grad(function(x, y) x^2 * y^3)
  expect_tensor(op_grad(dx, wrt = 2)(2, 3), 6 * 2 * 3^2, tolerance = 1e-6)
})
