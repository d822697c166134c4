# R functions that Python calls: the classes of the errors that leave them
# reach the R caller (callbacks.R).

test_that("a customgrad error keeps its class through the R functions keras3 hands to Python", {
  skip_if_no_backend()
  # A gradient of the wrong shape: op_grad() raises customgrad_error_grad_shape
  # inside R functions that Python calls (reticulate would make it a plain
  # RuntimeError).
  wrong <- op_custom_gradient(\(x) tuple(op_sin(x), \(upstream) op_ones(7)))
  grad_sum <- op_grad(\(w) op_sum(wrong(w)))
  x <- op_ones(c(3, 2))
  message <- "^Each gradient must have its input's shape\\.\n"
  err <- expect_error(
    suppressMessages(op_map(x, \(row) grad_sum(row))),
    class = "customgrad_error_grad_shape"
  )
  expect_match(conditionMessage(err), message)
  expect_match(
    conditionMessage(err),
    "has shape (7); the input has shape (2)",
    fixed = TRUE
  )
  lambda <- layer_lambda(f = \(x) grad_sum(x))
  err <- expect_error(lambda(x), class = "customgrad_error_grad_shape")
  expect_match(
    conditionMessage(err),
    "the input has shape (3, 2)",
    fixed = TRUE
  )
})
