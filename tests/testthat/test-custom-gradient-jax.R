# JAX's own conventions: jax.grad runs grad at forward time; jax.jit.

test_that("under jax.jit R runs only while tracing", {
  skip_unless_backend("jax")
  jax <- reticulate::import("jax")
  calls <- c(f = 0, grad = 0)
  h <- op_custom_gradient(function(x) {
    calls[["f"]] <<- calls[["f"]] + 1
    tuple(x^3, function(upstream) {
      calls[["grad"]] <<- calls[["grad"]] + 1
      upstream * 3 * x^2
    })
  })
  step <- jax$jit(jax$grad(function(x) sum(h(x))))
  for (v in 1:3) {
    expect_values(as.array(step(op_convert_to_tensor(c(v, 2)))), 3 * c(v, 2)^2)
  }
  expect_identical(calls, c(f = 1, grad = 1))
  value <- jax$jit(h)
  expect_values(as.array(value(op_convert_to_tensor(2))), 8)
})

test_that("jax.grad(jax.grad(h)) differentiates the rule again", {
  skip_unless_backend("jax")
  jax <- reticulate::import("jax")
  cube <- op_custom_gradient(function(x) tuple(x^3, function(g) g * 3 * x^2))
  expect_values(as.array(jax$grad(cube)(2)), 12)
  expect_values(as.array(jax$grad(jax$grad(cube))(2)), 12)
  expect_values(as.array(jax$jit(jax$grad(jax$grad(cube)))(3)), 18)
})

test_that("JAX gets zeros, with the input's dtype, for a NULL gradient", {
  skip_unless_backend("jax")
  jax <- reticulate::import("jax")
  h <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(g) list(g * y, NULL))
  })
  g <- jax$grad(function(x, y) sum(h(x, y)), argnums = list(0L, 1L))(
    op_convert_to_tensor(c(1, 2)),
    op_convert_to_tensor(c(3, 4))
  )
  expect_values(as.array(g[[1]]), c(3, 4))
  expect_values(as.array(g[[2]]), c(0, 0))
})

test_that("eager jax.grad() steps leave nothing behind in JAX's caches", {
  skip_unless_backend("jax")
  jax <- reticulate::import("jax")
  py_gc <- reticulate::import("gc", convert = FALSE)
  live_objects <- function() {
    gc()
    py_gc$collect()
    reticulate::py_len(py_gc$get_objects())
  }
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    tuple(op_log(1 + e), \(upstream) upstream * (1 - 1 / (1 + e)))
  })
  g <- jax$grad(\(v) op_sum(log1pexp(v)))
  x <- op_convert_to_tensor(c(-1, 0, 1))
  for (i in 1:20) {
    g(x)
  }
  before <- live_objects()
  for (i in 1:300) {
    grad <- g(x)
  }
  # An entry per step in JAX's jit cache, keyed by the rule's trace, was
  # 300 more objects here.
  expect_lt(live_objects() - before, 30)
  expect_values(as.array(grad), stats::plogis(c(-1, 0, 1)))
})
