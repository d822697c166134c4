# R host ops on JAX: jax.pure_callback under jax.custom_gradient (_host.py).

test_that("jax.jit() and jax.grad() run R in host callbacks", {
  skip_unless_backend("jax")
  jax <- reticulate::import("jax")
  bk <- bessel_k()
  x <- op_convert_to_tensor(x_host, "float32")
  expect_values(as.array(jax$jit(bk)(x)), besselK(x_host, 1.5))
  step <- jax$jit(jax$grad(function(x) op_sum(bk(x))))
  expect_values(as.array(step(x)), dbessel_k(x_host))
  expect_values(as.array(step(x * 2)), dbessel_k(x_host * 2))
})

test_that("op_vectorized_map() calls R once per element, and differentiates", {
  skip_unless_backend("jax")
  calls <- 0
  square <- op_custom_gradient(trace = FALSE, value_like = "x", function(x) {
    calls <<- calls + 1
    xv <- as.array(x)
    tuple(
      op_convert_to_tensor(xv^2, op_dtype(x)),
      function(up) up * op_convert_to_tensor(3 * xv, op_dtype(x)) # not 2x
    )
  })
  m <- matrix(1:6, 3) + 0
  x <- op_convert_to_tensor(m, "float32")
  expect_values(as.array(op_vectorized_map(x, \(row) square(row))), m^2)
  expect_equal(calls, 3)
  g <- op_grad(\(x) op_sum(op_vectorized_map(x, \(row) square(row))))(x)
  expect_values(as.array(g), 3 * m)
})

test_that("errors of f and grad in host callbacks are classed", {
  skip_unless_backend("jax")
  expect_host_errors_classed()
})

test_that("value_like is asked for where it is missing, and checked", {
  skip_unless_backend("jax")
  expect_value_like_checked()
})

test_that("exporting a model that computes in R is refused, saying why", {
  skip_unless_backend("jax")
  model <- host_model(bessel_k())
  # JAX fails while lowering the callback for any batch size (std::bad_cast).
  err <- expect_error(
    model$export(withr::local_tempfile()),
    class = "customgrad_error_thread"
  )
  expect_match(
    conditionMessage(err),
    "an exported computation can't call R",
    fixed = TRUE
  )
  expect_match(conditionMessage(err), "save_model()", fixed = TRUE)
})
