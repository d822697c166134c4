# PyTorch runs eagerly: R gets the tensors at every call, compiled or not,
# and needs no value_like; errors are R's own, as in any eager call.

test_that("op_compile() needs no value_like, and f's errors are its own", {
  skip_unless_backend("torch")
  expect_host_compiles(bessel_k(value_like = NULL))
  checked <- op_custom_gradient(trace = FALSE, function(x) {
    xv <- as.array(x)
    if (any(xv > 10)) {
      stop("too big")
    }
    tuple(x * 2, function(up) up * 2)
  })
  err <- expect_error(op_compile(\(x) checked(x))(op_convert_to_tensor(20)))
  expect_s3_class(err, "simpleError")
  expect_false(inherits(err, "customgrad_error"))
})
