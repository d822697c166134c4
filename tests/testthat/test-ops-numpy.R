# op_unique(): positions in its results are 1-based, as R's match() gives.

test_that("op_unique() gives R positions of first occurrences and of values", {
  skip_if_no_backend()
  x <- c(3, 1, 3)
  res <- op_unique(
    x,
    return_index = TRUE,
    return_inverse = TRUE,
    return_counts = TRUE
  )
  values <- sort(unique(x))
  expect_tensor(res[[1]], values)
  expect_tensor(res[[2]], match(values, x))
  expect_tensor(res[[3]], match(x, values))
  expect_tensor(res[[4]], as.vector(table(x)))
})

test_that("op_unique() gives Python's 0-based positions with zero_indexed = TRUE", {
  skip_if_no_backend()
  res <- op_unique(c(3, 1, 3), return_inverse = TRUE, zero_indexed = TRUE)
  expect_tensor(res[[2]], c(1, 0, 1))
})
