# JAX only: tensors inside jax$jit() (op_compile(trace = FALSE) hands it R's
# code) are tracers.

test_that("a traced JAX tensor prints as symbolic and has no R value", {
  skip_unless_backend("jax")
  x <- op_convert_to_tensor(c(1, 2, 3))
  printed <- NULL
  shape <- NULL
  show <- op_compile(trace = FALSE, function(x) {
    printed <<- capture.output(print(x))
    shape <<- c(dim(x), length(x))
    x * 2
  })
  expect_equal(as.vector(as.array(show(x))), c(2, 4, 6))
  expect_identical(
    printed,
    c(
      "<jax tensor shape(3), dtype=float32>",
      "(symbolic: no values while tracing)"
    )
  )
  expect_equal(shape, c(3, 3))
  to_r <- op_compile(trace = FALSE, function(x) {
    as.numeric(x)
    x
  })
  expect_error(to_r(x), class = "customgrad_error_symbolic_tensor")
})
