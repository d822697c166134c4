test_that("op_grad() of elementary functions matches their derivatives", {
  skip_if_no_backend()
  x <- c(0.5, 1, 2)
  cases <- list(
    sin = list(sin, cos),
    cos = list(cos, function(x) -sin(x)),
    exp = list(exp, exp),
    log = list(log, function(x) 1 / x),
    sqrt = list(sqrt, function(x) 0.5 / sqrt(x)),
    tanh = list(tanh, function(x) 1 - tanh(x)^2),
    cube = list(function(x) x^3, function(x) 3 * x^2),
    reciprocal = list(function(x) 1 / x, function(x) -1 / x^2),
    product = list(function(x) x * exp(x), function(x) (1 + x) * exp(x))
  )
  for (name in names(cases)) {
    f <- cases[[name]][[1]]
    df <- cases[[name]][[2]]
    g <- op_grad(function(x) sum(f(x)))
    expect_tensor(g(x), df(x), tolerance = 1e-5)
  }
  # A scalar function of a scalar: the returned function keeps f's formals.
  dsin <- op_grad(sin)
  expect_identical(names(formals(dsin)), "x")
  expect_tensor(dsin(1), cos(1))
})

test_that("op_value_and_grad() returns the value and the gradient", {
  skip_if_no_backend()
  out <- op_value_and_grad(function(x) sum(exp(x)))(c(0, 1))
  expect_named(out, c("value", "grad"))
  expect_tensor(out$value, 1 + exp(1), tolerance = 1e-6)
  expect_tensor(out$grad, exp(c(0, 1)), tolerance = 1e-6)
  # Tensors come back as keras3 hands them out: conversion on.
  expect_identical(out$value$ndim, 0L)
  expect_identical(out$grad$ndim, 1L)
})

test_that("several wrt give a named list; nested arguments are mirrored", {
  skip_if_no_backend()
  loss <- function(x, p) sum(p$w * x^2) + p$b[[1]] * p$b[[2]]
  x <- c(1, 2)
  p <- list(w = c(3, 4), b = list(5, 6))
  gp <- op_grad(loss, wrt = 2)(x, p)
  expect_named(gp, c("w", "b"))
  expect_tensor(gp$w, x^2)
  expect_tensor(gp$b[[1]], 6)
  expect_tensor(gp$b[[2]], 5)
  both <- op_value_and_grad(loss, wrt = c(2, 1))(x, p)
  expect_tensor(both$value, 3 + 16 + 30)
  expect_named(both$grad, c("p", "x"))
  expect_tensor(both$grad$x, 2 * p$w * x)
  expect_tensor(both$grad$p$w, x^2)
  # A matrix keeps its shape and element order.
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  expect_tensor(op_grad(function(m) sum(m^2))(m), 2 * m)
})

test_that("arguments not in wrt reach f unchanged, even if not tensors", {
  skip_if_no_backend()
  seen <- NULL
  f <- function(x, power, label) {
    seen <<- list(power = power, label = label)
    sum(x^power)
  }
  g <- op_grad(f)
  expect_tensor(g(c(1, 2), 3L, "a label"), 3 * c(1, 2)^2)
  expect_identical(seen, list(power = 3L, label = "a label"))
  # Functions with `...`: wrt counts the arguments as called.
  dots <- function(...) sum(..1 * ..2)
  expect_tensor(op_grad(dots, wrt = 2)(c(1, 2), c(3, 4)), c(1, 2))
})

test_that("one tensor passed to two arguments is differentiated as one", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(2, 3))
  f <- function(a, b) op_sum(a * a * b)
  # d/da = 2ab, not 2ab + a^2 (b is the same tensor, not differentiated)
  expect_tensor(op_grad(f)(x, x), c(8, 18))
  expect_tensor(op_grad(f, wrt = 2)(x, x), c(4, 9))
  both <- op_grad(f, wrt = 1:2)(x, x)
  expect_tensor(both[[1]], c(8, 18))
  expect_tensor(both[[2]], c(4, 9))
})

test_that("the gradient of a custom gradient is the custom one", {
  skip_if_no_backend()
  log1pexp <- new_log1pexp()
  expect_tensor(op_grad(log1pexp)(100), 1)
  expect_tensor(
    op_grad(function(x) sum(log1pexp(x)))(c(-1, 0, 1)),
    plogis(c(-1, 0, 1))
  )
  # exp(1000) overflows in float32 and float64 alike.
  naive <- function(x) log(1 + exp(x))
  expect_true(is.nan(grad_values(op_grad(naive)(1000))))
  expect_tensor(op_grad(log1pexp)(1000), 1)
  # A wrong rule gives a wrong gradient: op_grad() uses the rule as given.
  expect_tensor(op_grad(new_custom_sin(right = FALSE))(1), sin(1))
})

test_that("upstream gives a vector-Jacobian product", {
  skip_if_no_backend()
  x <- c(0, 1)
  expect_tensor(op_grad(exp, upstream = c(1, 10))(x), c(1, 10) * exp(x))
  # Nested values take a nested upstream.
  f <- function(x) list(a = x * 2, b = x^2)
  g <- op_grad(f, upstream = list(a = c(1, 1), b = c(3, 5)))
  expect_tensor(g(x), 2 + c(3, 5) * 2 * x)
  # A tensor as upstream, and the same result as a scalar function.
  u <- op_convert_to_tensor(c(2, 3))
  expect_tensor(op_value_and_grad(sin, upstream = u)(x)$grad, c(2, 3) * cos(x))
  expect_tensor(op_grad(function(x) sum(sin(x) * u))(x), c(2, 3) * cos(x))
})

test_that("gradients of gradients: d2/dx2 sin = -sin, d3/dx3 sin = -cos", {
  skip_if_no_backend()
  x <- c(0.5, 1, 2)
  d1 <- op_grad(function(x) sum(sin(x)))
  d2 <- op_grad(function(x) sum(d1(x)))
  d3 <- op_grad(function(x) sum(d2(x)))
  expect_tensor(d2(x), -sin(x), tolerance = 1e-5)
  expect_tensor(d3(x), -cos(x), tolerance = 1e-5)
  expect_tensor(op_grad(op_grad(exp))(1), exp(1), tolerance = 1e-6)
  # Mixed partials of x^2 * y^3: d/dy (d/dx) = 6 x y^2.
  dx <- op_grad(function(x, y) x^2 * y^3)
  expect_tensor(op_grad(dx, wrt = 2)(2, 3), 6 * 2 * 3^2, tolerance = 1e-6)
  # Through a custom gradient: d2/dx2 log(1 + exp(x)) = s (1 - s).
  s <- plogis(0.3)
  expect_tensor(
    op_grad(op_grad(new_log1pexp()))(0.3),
    s * (1 - s),
    tolerance = 1e-5
  )
})

test_that("the caller's tensors are left as they were", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2))
  g <- op_grad(function(x) sum(x^2))
  expect_tensor(g(x), c(2, 4))
  expect_tensor(x, c(1, 2))
  if (config_backend() == "torch") {
    torch <- reticulate::import("torch", convert = FALSE)
    expect_false(py_value(x$requires_grad))
    expect_null(py_value(x$grad))
    w <- torch$tensor(c(1, 2), requires_grad = TRUE)
    gw <- g(w)
    expect_null(py_value(w$grad))
    # With history and grad mode on, the gradient can be differentiated:
    # d/dw sum(2 w) = 2.
    sum(gw)$backward()
    expect_equal(as.vector(as.array(w$grad)), c(2, 2))
    ng <- torch$no_grad()
    ng$`__enter__`()
    plain <- g(w)
    ng$`__exit__`(NULL, NULL, NULL)
    expect_false(py_value(plain$requires_grad))
  }
})

test_that("op_grad() works inside the backend's own transforms", {
  skip_if_no_backend()
  g <- op_grad(function(x) sum(sin(x)))
  x <- c(0.5, 1)
  result <- switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      traced <- tf$`function`(reticulate::r_to_py(g), autograph = FALSE)
      reticulate::py_call(traced, op_convert_to_tensor(x))
    },
    jax = {
      jax <- reticulate::import("jax", convert = FALSE)
      jitted <- reticulate::py_call(
        jax$jit(reticulate::r_to_py(g)),
        op_convert_to_tensor(x)
      )
      expect_tensor(jitted, cos(x), tolerance = 1e-6)
      # and inside jax.grad: the second derivative
      outer <- jax$grad(reticulate::r_to_py(function(x) sum(g(x))))
      reticulate::py_call(outer, op_convert_to_tensor(x)) * -1
    },
    torch = {
      torch <- reticulate::import("torch", convert = FALSE)
      w <- torch$tensor(x, requires_grad = TRUE)
      sum(g(w))$backward()
      -w$grad
    }
  )
  expected <- if (config_backend() == "tensorflow") cos(x) else sin(x)
  expect_tensor(result, expected, tolerance = 1e-6)
})

test_that("errors in f reach the caller as the original condition", {
  skip_if_no_backend()
  g <- op_grad(function(x) {
    rlang::abort("f failed on purpose", class = "my_error")
  })
  expect_error(g(1), "f failed on purpose", class = "my_error")
})

test_that("bad arguments are classed errors", {
  skip_if_no_backend()
  f <- function(x, y) sum(x * y)
  expect_snapshot(op_grad("f"), error = TRUE)
  expect_error(op_grad("f"), class = "customgrad_error_not_function")
  expect_snapshot(op_grad(f, wrt = 0), error = TRUE)
  expect_error(op_grad(f, wrt = c(1, 1)), class = "customgrad_error_wrt")
  expect_error(op_grad(f, wrt = "x"), class = "customgrad_error_wrt")
  expect_snapshot(op_value_and_grad(f, wrt = 3), error = TRUE)
  expect_snapshot(op_grad(f, upstream = "a"), error = TRUE)
  dots <- op_grad(function(...) sum(..1), wrt = 2)
  expect_snapshot(dots(1), error = TRUE)
  g <- op_grad(f)
  expect_snapshot(g("a", 1), error = TRUE)
  expect_error(g("a", 1), class = "customgrad_error_input")
})

test_that("a non-scalar value without upstream is a classed error", {
  skip_if_no_backend()
  g <- op_grad(exp)
  # float32 input: R numbers become float64 tensors on TensorFlow only, and
  # the message names the dtype.
  expect_snapshot(g(op_convert_to_tensor(c(1, 2), "float32")), error = TRUE)
  expect_error(g(c(1, 2)), class = "customgrad_error_not_scalar")
  two <- op_grad(function(x) list(sum(x), sum(x)))
  expect_error(two(1), class = "customgrad_error_not_scalar")
})

test_that("an upstream that doesn't match the value is a classed error", {
  skip_if_no_backend()
  g <- op_grad(exp, upstream = c(1, 2, 3))
  err <- expect_error(g(c(1, 2)), class = "customgrad_error_upstream")
  expect_match(
    conditionMessage(err),
    "`upstream` has shape (3); the value has shape (2).",
    fixed = TRUE
  )
  nested <- op_grad(exp, upstream = list(1, 2))
  err <- expect_error(nested(1), class = "customgrad_error_upstream")
  expect_match(
    conditionMessage(err),
    "must be nested like `f`'s value",
    fixed = TRUE
  )
})

test_that("an integer tensor can't be differentiated", {
  skip_if_no_backend()
  g <- op_grad(function(x, y) sum(y), wrt = 2)
  err <- expect_error(
    g(1, op_convert_to_tensor(1:2)),
    class = "customgrad_error_wrt_dtype"
  )
  expect_match(
    conditionMessage(err),
    "Can't differentiate with respect to argument 2.\nx It has dtype \"int32\"",
    fixed = TRUE
  )
  # R integers are numbers to differentiate: they become floats.
  expect_tensor(op_grad(function(x) sum(x^2))(1:2), c(2, 4))
})

test_that("a gradient function prints what it differentiates", {
  expect_snapshot({
    op_grad(sin)
    op_value_and_grad(function(x, p) sum(p$w * x), wrt = 1:2)
    op_grad(function(...) sum(..1), wrt = 1)
  })
})

test_that("customgrad's errors about a wrapped function without a name name the caller's call, not f()", {
  skip_if_no_backend()
  double_it <- function(x) x * 2
  err <- expect_error(
    op_grad(op_grad(double_it))(c(1, 2)),
    class = "customgrad_error_not_scalar"
  )
  expect_equal(conditionCall(err), quote(op_grad(op_grad(double_it))(c(1, 2))))
  expect_no_match(conditionMessage(err), "f()", fixed = TRUE)
})

# --- Traced: R runs f once per input signature ---------------------------

test_that("op_grad() runs f once per signature and replays it without R", {
  skip_if_no_backend()
  calls <- 0
  g <- op_grad(function(x) {
    calls <<- calls + 1
    sum(x^3)
  })
  expect_tensor(g(c(1, 2)), 3 * c(1, 2)^2)
  expect_identical(calls, 1)
  before <- r_calls_so_far()
  expect_tensor(g(c(3, 4)), 3 * c(3, 4)^2)
  expect_tensor(g(op_convert_to_tensor(c(-1, 5))), 3 * c(-1, 5)^2)
  expect_identical(r_calls_so_far(), before)
  expect_identical(calls, 1)
  # A new shape is a new signature.
  expect_tensor(g(c(1, 2, 3)), 3 * c(1, 2, 3)^2)
  expect_identical(calls, 2)
})

test_that("a training step's data are inputs, not part of the trace", {
  skip_if_no_backend()
  calls <- 0
  loss <- function(w, x, y) {
    calls <<- calls + 1
    op_mean((op_matmul(x, w) - y)^2)
  }
  g <- op_value_and_grad(loss)
  w <- matrix(c(0.5, -1), 2)
  for (i in 1:3) {
    x <- matrix(i * c(1, 2, 3, 4, 5, 6), 3)
    y <- matrix(c(1, 0, i), 3)
    out <- g(w, x, y)
    r <- x %*% w - y
    expect_tensor(out$value, mean(r^2))
    expect_tensor(out$grad, 2 * t(x) %*% r / 3)
  }
  expect_identical(calls, 1)
})

test_that("a new value of a non-tensor argument traces again", {
  skip_if_no_backend()
  seen <- character()
  f <- function(x, how) {
    seen <<- c(seen, how)
    if (how == "square") sum(x^2) else sum(x^3)
  }
  g <- op_grad(f)
  expect_tensor(g(c(1, 2), "square"), 2 * c(1, 2))
  expect_tensor(g(c(1, 2), "cube"), 3 * c(1, 2)^2)
  expect_tensor(g(c(5, 6), "square"), 2 * c(5, 6))
  expect_identical(seen, c("square", "cube"))
})

test_that("an f that can't be traced runs at every call, after one message naming it", {
  skip_if_no_backend()
  calls <- 0
  noisy <- function(x) {
    calls <<- calls + 1
    sum(x * 2) + 0 * stats::runif(1)
  }
  g <- op_grad(noisy)
  expect_message(
    expect_tensor(g(c(1, 2)), c(2, 2)),
    "`op_grad\\(noisy\\)` could not be traced",
    class = "customgrad_message_fallback"
  )
  expect_no_message(expect_tensor(g(c(3, 4)), c(2, 2)))
  expect_identical(calls, 3) # the failed trace, then each call
  quiet <- op_grad(noisy, trace = FALSE)
  expect_no_message(expect_tensor(quiet(1), 2))
  strict <- op_grad(noisy, trace = "strict")
  expect_error(strict(1), "can't be traced", class = "customgrad_error_trace")
  expect_error(
    op_grad(noisy, trace = "yes"),
    class = "customgrad_error_trace_arg"
  )
})

test_that("a rule is the function's derivative at every order, on every backend", {
  skip_if_no_backend()
  # A rule that is not sin's derivative: 2 cos. d/dx f(x)^2 = 2 f r, and
  # again 2 r^2 + 2 f r', and again 6 r r' + 2 f r'', with r = 2 cos x,
  # as TensorFlow and PyTorch give (JAX differentiated sin itself once).
  f <- op_custom_gradient(function(x) {
    tuple(op_sin(x), function(g) 2 * g * op_cos(x))
  })
  x <- 2
  r <- c(2 * cos(x), -2 * sin(x), -2 * cos(x))
  d1 <- op_grad(function(x) f(x)^2)
  d2 <- op_grad(d1)
  for (i in 1:2) {
    expect_tensor(d2(x), 2 * r[[1]]^2 + 2 * sin(x) * r[[2]], tolerance = 1e-5)
  }
  expect_tensor(
    op_grad(op_grad(function(x) f(x)^2, trace = FALSE), trace = FALSE)(x),
    2 * r[[1]]^2 + 2 * sin(x) * r[[2]],
    tolerance = 1e-5
  )
  expect_tensor(
    op_grad(d2)(x),
    6 * r[[1]] * r[[2]] + 2 * sin(x) * r[[3]],
    tolerance = 1e-4
  )
  expect_values(
    native_grad(function(t) d1(t), x),
    2 * r[[1]]^2 + 2 * sin(x) * r[[2]],
    tolerance = 1e-5
  )
  # The value of op_value_and_grad() differentiated again (after jax's
  # CustomJVPTest.test_invariance): the rule, 3.
  h <- op_custom_gradient(function(x) {
    tuple(op_cos(2 * x) / 2, function(g) 3 * g)
  })
  expect_tensor(op_grad(function(x) op_value_and_grad(h)(x)$value)(1), 3)
})

test_that("the backend's own gradient of a replayed op_grad() is the second derivative", {
  skip_if_no_backend()
  # Calls after the first replay (compiled on TensorFlow): the user's
  # tape, jax.grad or backward() differentiates the replay itself.
  d1 <- op_grad(function(x) op_sum(op_sin(x)))
  x <- c(0.5, 1, 2)
  for (i in 1:3) {
    second <- native_grad(function(t) d1(t), x + i)
    expect_values(second, -sin(x + i), tolerance = 1e-5)
  }
})

test_that("the backend's gradient of a loss of op_grad()'s result reaches the weights f reads (a gradient penalty)", {
  skip_if_no_backend()
  # d/dw [sum(d/dx sum(w x^2)) + w] = sum(2 x) + 1; w is captured by f,
  # not an argument: a model's weight in a gradient penalty. On PyTorch
  # the gradient must carry the graph back to w although x needs none.
  x <- op_convert_to_tensor(c(1, 2, 3), "float32")
  penalised <- function(w) {
    dx <- op_grad(function(x) op_sum(x^2 * w))
    op_sum(dx(x)) + w
  }
  for (i in 1:2) {
    expect_values(native_grad(penalised, 2), 13, tolerance = 1e-5)
  }
  # w read by a custom gradient's rule alone, traced or not: d/dw of
  # sum((d/dx sum(x w))^2) + w = 2 w n + 1 for n elements.
  for (trace in c(TRUE, FALSE)) {
    through_rule <- function(w) {
      hw <- op_custom_gradient(trace = trace, function(x) {
        tuple(op_multiply(x, w), function(u) op_multiply(u, w))
      })
      dx <- op_grad(function(x) op_sum(hw(x)))
      op_sum(op_square(dx(x))) + w
    }
    expect_values(native_grad(through_rule, 2), 13, tolerance = 1e-5)
  }
})

test_that("gradients of gradients are traced too: a replay runs no R", {
  skip_if_no_backend()
  d1 <- op_grad(function(x) sum(sin(x)))
  d2 <- op_grad(function(x) sum(d1(x)))
  x <- c(0.5, 1, 2)
  expect_tensor(d2(x), -sin(x), tolerance = 1e-5)
  before <- r_calls_so_far()
  expect_tensor(d2(x + 1), -sin(x + 1), tolerance = 1e-5)
  expect_identical(r_calls_so_far(), before)
})

test_that("arguments named in any order, or through `...`, get their own gradients", {
  skip_if_no_backend()
  g <- op_grad(function(x, y) sum(x^2 * y), wrt = 1:2)
  out <- g(x = c(1, 2), y = c(3, 4))
  expect_tensor(out$x, 2 * c(1, 2) * c(3, 4))
  swapped <- g(y = c(1, 2), x = c(3, 4))
  # R matches the arguments to f's, so they are named as in f.
  expect_tensor(swapped$y, c(3, 4)^2)
  expect_tensor(swapped$x, 2 * c(3, 4) * c(1, 2))
  # Through `...`, the names are part of the signature.
  dots <- op_grad(function(...) sum(list(...)$a^2))
  expect_tensor(dots(a = 3, b = 1), 6)
  expect_tensor(dots(b = 3, a = 1), 0)
})
