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
  expect_equal(
    native_grad(log1pexp, c(0, 1)),
    array(plogis(c(0, 1))),
    tolerance = 1e-6
  )
  # The naive formula's gradient is NaN there: the custom one is needed.
  naive <- function(x) op_log(1 + op_exp(x))
  expect_true(is.nan(native_grad(naive, 100)))
})

test_that("the three grad signatures give the same gradient", {
  skip_if_no_backend()
  agnostic <- op_custom_gradient(function(x) {
    tuple(x^2, function(..., upstream = NULL) (upstream %||% ..1) * 2 * x)
  })
  tf_jax_style <- op_custom_gradient(function(x) {
    tuple(x^2, function(upstream) upstream * 2 * x)
  })
  torch_style <- op_custom_gradient(function(x) {
    tuple(x^2, function(..., upstream) upstream * 2 * ..1)
  })
  dots_only <- op_custom_gradient(function(x) {
    tuple(x^2, function(...) ..1 * 2 * x)
  })
  for (h in list(agnostic, tf_jax_style, torch_style, dots_only)) {
    expect_values(native_grad(h, c(1, -3)), c(2, -6))
  }
})

test_that("JAX docs: x^2 with rule g * x gives 3 at x = 3", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) tuple(x^2, function(g) g * x))
  expect_values(native_grad(f, 3), 3)
  expect_tensor(f(3), 9)
})

test_that("several inputs: one gradient each, as tuple() or list()", {
  skip_if_no_backend()
  # JAX docs' x * y, and TF docs' bar(x, y) = x * y with grads (dy * y, dy * x).
  as_tuple <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(upstream) tuple(upstream * y, upstream * x))
  })
  as_list <- op_custom_gradient(function(x, y) {
    list(x * y, function(upstream) list(upstream * y, upstream * x))
  })
  for (bar in list(as_tuple, as_list)) {
    g <- native_grads(function(x, y) sum(bar(x, y)), c(2, 3), c(5, 7))
    expect_values(g[[1]], c(5, 7))
    expect_values(g[[2]], c(2, 3))
  }
})

test_that("NULL gradient: no gradient (zeros) for that input", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(upstream) list(upstream * y, NULL))
  })
  g <- native_grads(function(x, y) sum(h(x, y)), c(2, 3), c(5, 7))
  expect_values(g[[1]], c(5, 7))
  expect_values(g[[2]], c(0, 0))
})

test_that("several and nested outputs: upstream has the value's structure", {
  skip_if_no_backend()
  seen <- NULL
  h <- op_custom_gradient(function(x) {
    value <- list(x * 2, list(a = x^2, b = x * 3))
    grad <- function(upstream) {
      seen <<- c(length(upstream), length(upstream[[2]]), names(upstream[[2]]))
      upstream[[1]] * 2 + upstream[[2]]$a * 2 * x + upstream[[2]]$b * 3
    }
    tuple(value, grad)
  })
  out <- h(c(1, 2))
  expect_type(out, "list")
  expect_named(out[[2]], c("a", "b"))
  expect_tensor(out[[2]]$a, c(1, 4))
  # The tensors come back as keras3 hands them out: conversion on.
  expect_identical(out[[2]]$a$ndim, 1L)
  loss <- function(x) {
    o <- h(x)
    sum(o[[1]]) + sum(o[[2]]$a) + sum(o[[2]]$b)
  }
  expect_values(native_grad(function(x) loss(x), c(1, 2)), 2 + 2 * c(1, 2) + 3)
  expect_identical(seen, c("2", "2", "a", "b"))
})

test_that("an unused output gets a zero upstream", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(list(x * 2, x * 3), function(upstream) {
      upstream[[1]] * 2 + upstream[[2]] * 3
    })
  })
  expect_values(native_grad(function(x) h(x)[[1]], c(1, 2)), c(2, 2))
})

test_that("nested inputs: the gradient mirrors their structure", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(xs, w) {
    value <- sum(xs[[1]] * w) + sum(xs[[2]]$b * 2)
    grad <- function(upstream) {
      list(
        list(upstream * w, list(b = upstream * 2 + 0 * xs[[2]]$b)),
        upstream * xs[[1]]
      )
    }
    tuple(value, grad)
  })
  g <- native_grads(h, list(c(1, 2), list(b = c(3, 4, 5))), c(10, 20))
  expect_values(g[[1]][[1]], c(10, 20))
  expect_values(g[[1]][[2]]$b, c(2, 2, 2))
  expect_values(g[[2]], c(1, 2))
  # One nested input: its gradient may leave out the outer list.
  one <- op_custom_gradient(function(xs) {
    tuple(sum(xs[[1]]) + sum(xs[[2]]), function(upstream) {
      list(upstream + 0 * xs[[1]], upstream * 2 + 0 * xs[[2]])
    })
  })
  g <- native_grads(one, list(c(1, 2), 3))
  expect_values(g[[1]][[1]], c(1, 1))
  expect_values(g[[1]][[2]], 2)
})

test_that("R numbers and arrays become tensors of the dtype keras3 gives R vectors", {
  skip_if_no_backend()
  got <- NULL
  # Untraced, so that `got` is the tensor of each call.
  h <- op_custom_gradient(
    function(x) {
      got <<- x
      tuple(x * 2, function(upstream) upstream * 2)
    },
    trace = FALSE
  )
  expect_tensor(h(1.5), 3)
  # An R number too, so that numbers and vectors mix on TensorFlow.
  expect_identical(op_dtype(got), op_dtype(op_convert_to_tensor(c(1.5, 2))))
  expect_length(op_shape(got), 0) # still a scalar
  two <- op_custom_gradient(function(x, s) {
    tuple(x * s, function(upstream) list(upstream * s, sum(upstream * x)))
  })
  expect_tensor(two(c(1, 2), 10), c(10, 20))
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  expect_equal(as.array(h(m)), m * 2)
  expect_identical(dim(as.array(got)), c(2L, 3L))
  expect_identical(op_dtype(got), op_dtype(op_convert_to_tensor(m)))
  mi <- matrix(1:6, 2)
  h(mi)
  expect_identical(op_dtype(got), op_dtype(op_convert_to_tensor(mi)))
  expect_tensor(h(reticulate::py_eval("2.5", convert = FALSE)), 5)
})

test_that("reentrant: h inside another custom gradient's f and grad", {
  skip_if_no_backend()
  square <- op_custom_gradient(function(x) {
    tuple(x^2, function(upstream) upstream * 2 * x)
  })
  outer <- op_custom_gradient(function(x) {
    value <- square(x) + square(x * 2) # 5 x^2
    # 10 x
    grad <- function(upstream) upstream * (square(x + 1) - square(x - 1)) * 2.5
    tuple(value, grad)
  })
  for (i in 1:3) {
    expect_tensor(outer(c(1, 2)), c(5, 20))
    expect_values(native_grad(outer, c(1, 2)), c(10, 20))
  }
})

# The gradient of sum(f(x)) for the tensor `x`, in x's dtype, by the
# backend's own autodiff: tape$gradient(), jax$grad(), $backward().
native_gradient_of <- function(f, x) {
  switch(
    config_backend(),
    tensorflow = {
      tf <- tf_module()
      tape <- tf$GradientTape()
      y <- local({
        local_tape(tape)
        tape$watch(x)
        op_sum(f(x))
      })
      tape$gradient(y, x)
    },
    jax = reticulate::import("jax")$grad(function(t) op_sum(f(t)))(x),
    torch = {
      x <- x$detach()$requires_grad_(TRUE)
      op_sum(f(x))$backward()
      x$grad
    }
  )
}

dtype_of <- function(x) {
  reticulate::import("keras")$backend$standardize_dtype(x$dtype)
}

test_that("a floating gradient of another dtype comes back in its input's dtype", {
  skip_if_no_backend()
  # JAX without x64 makes float64 float32: float16 and float32 there.
  pairs <- if (config_backend() == "jax") {
    list(c("float32", "float16"), c("float16", "float32"))
  } else {
    list(
      c("float32", "float64"),
      c("float64", "float32"),
      c("float16", "float32")
    )
  }
  for (trace in c(TRUE, FALSE)) {
    for (pair in pairs) {
      grad_dtype <- pair[[2]]
      h <- op_custom_gradient(
        function(x) {
          tuple(x * 2, function(upstream) op_cast(upstream * 2, grad_dtype))
        },
        trace = trace
      )
      x <- op_convert_to_tensor(c(1, 2), pair[[1]])
      label <- paste(
        pair[[1]],
        "input,",
        grad_dtype,
        "gradient, trace =",
        trace
      )
      through_op_grad <- op_grad(\(x) op_sum(h(x)))(x)
      native <- native_gradient_of(h, x)
      expect_identical(dtype_of(through_op_grad), pair[[1]], label = label)
      expect_identical(dtype_of(native), pair[[1]], label = label)
      expect_values(as.array(through_op_grad), c(2, 2))
      expect_values(as.array(native), c(2, 2))
    }
  }
})

test_that("op_custom_gradient() returns a function with f's arguments", {
  h <- op_custom_gradient(function(x, y = 2) {
    tuple(x, function(upstream) upstream)
  })
  expect_identical(names(formals(h)), c("x", "y"))
  expect_identical(formals(h)$y, 2)
  expect_output(
    print(h),
    "<customgrad custom-gradient function>(x, y)",
    fixed = TRUE
  )
  # Byte-compiled: R's JIT leaves it interpreted, which costs every call.
  expect_match(capture.output(print(unclass(h))), "<bytecode", all = FALSE)
  expect_error(op_custom_gradient(1), class = "customgrad_error_not_function")
  expect_snapshot(op_custom_gradient("f"), error = TRUE)
})

test_that("defaults and named arguments reach f in its own order", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, y = 10) {
    passed <- nargs()
    tuple(x - y, function(upstream) {
      if (passed == 1) upstream else list(upstream, -upstream)
    })
  })
  expect_tensor(h(1), -9)
  expect_tensor(h(y = 1, x = 5), 4)
  g <- native_grads(function(a, b) sum(h(y = b, x = a)), c(1, 2), c(3, 4))
  expect_values(g[[1]], c(1, 1))
  expect_values(g[[2]], c(-1, -1))
})

# --- Which arguments are inputs (keras3's contract) -------------------------

test_that("a default the call did not pass is not an input, traced or not", {
  skip_if_no_backend()
  for (trace in c(TRUE, FALSE)) {
    # keras3's own example of a closure with a default
    h <- op_custom_gradient(
      function(x, k = 2) tuple(x * k, function(upstream) upstream * k),
      trace = trace
    )
    expect_tensor(h(c(1, 2)), c(2, 4))
    # Python callers pass the leading arguments only
    py_h <- reticulate::r_to_py(h)
    expect_tensor(
      reticulate::py_call(py_h, op_convert_to_tensor(c(1, 2))),
      c(2, 4)
    )
    expect_values(native_grad(h, c(1, 2)), c(2, 2))
    expect_tensor(op_grad(function(x) op_sum(h(x)))(c(1, 2)), c(2, 2))
    # passed, k is an input (an R double is a tensor) and gets a gradient
    k_passed <- op_custom_gradient(
      function(x, k = 2) {
        tuple(x * k, function(upstream) {
          list(upstream * k, op_sum(upstream * x))
        })
      },
      trace = trace
    )
    g <- op_grad(function(x, k) op_sum(k_passed(x, k)), wrt = 1:2)(c(1, 2), 3)
    expect_tensor(g[[1]], c(3, 3))
    expect_tensor(g[[2]], 3) # d/dk sum(x * k) = sum(x)
  }
})

test_that("an argument skipped before a passed one keeps the places", {
  skip_if_no_backend()
  seen <- NULL
  h <- op_custom_gradient(function(x, k = 2, axis = NULL) {
    seen <<- list(k = k, axis = axis)
    tuple(op_sum(x * k, axis = axis), function(upstream) {
      op_expand_dims(upstream, axis) * op_ones_like(x) * k
    })
  })
  x <- matrix(1:6, 2) + 0
  expect_tensor(h(x, axis = 2L), c(18, 24))
  expect_identical(seen, list(k = 2, axis = 2L))
  expect_tensor(op_grad(function(x) op_sum(h(x, axis = 1L)))(x), rep(2, 6))
})

test_that("grad returns one gradient per tensor input, or one per argument passed", {
  skip_if_no_backend()
  for (trace in c(TRUE, FALSE)) {
    per_tensor <- op_custom_gradient(
      function(x, k = NULL, tag = NULL, axis = NULL) {
        k <- k %||% 2L
        tuple(x * k, function(upstream) upstream * k)
      },
      trace = trace
    )
    per_argument <- op_custom_gradient(
      function(x, k = NULL, tag = NULL, axis = NULL) {
        k <- k %||% 2L
        tuple(x * k, function(upstream) list(upstream * k, NULL, NULL, NULL))
      },
      trace = trace
    )
    loss <- function(h, ...) function(x) op_sum(h(x, ...))
    expect_tensor(op_grad(loss(per_tensor, NULL))(c(1, 2)), c(2, 2))
    expect_tensor(
      op_grad(loss(per_tensor, 3L, "tag", axis = 2L))(c(1, 2)),
      c(3, 3)
    )
    expect_tensor(
      op_grad(loss(per_argument, 3L, "tag", axis = 2L))(c(1, 2)),
      c(3, 3)
    )
    expect_values(native_grad(per_tensor, c(1, 2), 5L), c(5, 5))
  }
})

test_that("f may return keras3's tuple() (a Python tuple) or list()", {
  skip_if_no_backend()
  styles <- list(
    tuple = function(x) tuple(x * 3, function(upstream) upstream * 3),
    list = function(x) list(x * 3, function(upstream) upstream * 3),
    torch_style = function(x) tuple(x * 3, function(..., upstream) upstream * 3)
  )
  for (f in styles) {
    h <- op_custom_gradient(f)
    expect_tensor(h(2), 6)
    expect_values(native_grad(h, c(1, 2)), c(3, 3))
  }
})

test_that("handed to Python, a custom-gradient function is its Python callable", {
  skip_if_no_backend()
  calls <- 0
  h <- op_custom_gradient(function(x) {
    calls <<- calls + 1
    tuple(x * 3, function(upstream) upstream * 3)
  })
  py_h <- reticulate::r_to_py(h)
  expect_false(inherits(py_h, "function"))
  apply_twice <- reticulate::py_eval("lambda f, x: f(f(x))", convert = FALSE)
  expect_tensor(
    reticulate::py_call(apply_twice, h, op_convert_to_tensor(2)),
    18
  )
  expect_identical(calls, 1) # traced at the first call, replayed after
})

test_that("a custom-gradient function saved in one R session runs in the next", {
  skip_if_no_backend()
  skip_if_no_callr()
  file <- withr::local_tempfile(fileext = ".rds")
  # Called before saving: the saved function holds Python handles, which
  # the next session restores as null pointers.
  callr::r(
    function(file) {
      library(customgrad)
      cube <- op_custom_gradient(function(x) {
        tuple(x^3, function(upstream) upstream * 3 * x^2)
      })
      sum_all <- op_custom_gradient(function(...) {
        tuple(Reduce(`+`, list(...)), function(upstream) {
          list(upstream, upstream)
        })
      })
      cube(2)
      sum_all(1, 2)
      saveRDS(list(cube = cube, sum_all = sum_all), file)
    },
    args = list(file = file),
    libpath = .libPaths()
  )
  got <- callr::r(
    function(file) {
      library(customgrad)
      saved <- readRDS(file)
      list(
        value = as.numeric(saved$cube(2)),
        grad = as.numeric(op_grad(saved$cube)(2)),
        sum = as.numeric(saved$sum_all(1, 2)),
        sum_grad = as.numeric(op_grad(\(x) saved$sum_all(x, x))(1))
      )
    },
    args = list(file = file),
    libpath = .libPaths()
  )
  expect_identical(got, list(value = 8, grad = 12, sum = 3, sum_grad = 2))
})

test_that("arguments that are not tensors reach f unchanged and get no gradient", {
  skip_if_no_backend()
  seen <- list()
  h <- op_custom_gradient(function(x, axis = NULL, scale = 2L, name = "a") {
    seen[[length(seen) + 1]] <<- list(axis = axis, scale = scale, name = name)
    tuple(x * scale, function(upstream) upstream * scale)
  })
  expect_tensor(h(c(1, 2)), c(2, 4))
  expect_identical(seen[[1]], list(axis = NULL, scale = 2L, name = "a"))
  expect_tensor(h(c(1, 2), axis = 1L, scale = 3L, name = "b"), c(3, 6))
  expect_identical(seen[[2]], list(axis = 1L, scale = 3L, name = "b"))
  # Each value is its own signature; a value seen before is replayed.
  expect_tensor(h(c(5, 6), axis = 1L, scale = 3L, name = "b"), c(15, 18))
  expect_length(seen, 2)
  grads <- native_grads(function(t) sum(h(t, scale = 5L)), c(1, 2))
  expect_values(grads[[1]], c(5, 5))
})

test_that("a list of options is one argument; lists of numbers are nested inputs", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, opts) {
    k <- if (isTRUE(opts$double)) 2 else 1
    tuple(x$a * k + x$b, function(upstream) {
      list(list(a = upstream * k, b = upstream), NULL)
    })
  })
  x <- list(a = c(1, 2), b = c(10, 20))
  expect_tensor(h(x, list(double = TRUE, label = "twice")), c(12, 24))
  expect_tensor(h(x, list(double = FALSE, label = "once")), c(11, 22))
})

test_that("an argument that can't be a tensor or an option is a classed error", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, k) {
    tuple(x * 2, function(upstream) list(upstream * 2, NULL))
  })
  expect_error(h(1, 1i), class = "customgrad_error_input")
  expect_snapshot(h(1, k = as.raw(1)), error = TRUE)
})

test_that("a gradient for an argument that is not a tensor is a classed error", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, label) {
    tuple(x * 2, function(upstream) list(upstream * 2, upstream))
  })
  expect_error(
    customgrad_call(native_grads(function(t) sum(h(t, "a")), c(1, 2))),
    class = "customgrad_error_grad_structure"
  )
})

test_that("a custom-gradient function prints what it wraps and how it traces", {
  expect_snapshot({
    op_custom_gradient(function(x) tuple(x, function(upstream) upstream))
    op_custom_gradient(
      function(x, k = 2L) {
        tuple(x * k, function(upstream) list(upstream * k, NULL))
      },
      trace = FALSE
    )
    op_custom_gradient(function(x) tuple(x, function(u) u), trace = "strict")
  })
})

test_that("once called, it also prints how many traces it keeps", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) upstream * 2)
  })
  h(1)
  h(c(1, 2))
  expect_output(print(h), "traces kept: 2")
})
