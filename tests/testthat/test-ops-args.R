# The R conventions of the op_*() wrappers (keras3's): 1-based axes and
# positions, R integers for Python ints, R functions as callbacks, R lists
# for Python tuples.

test_that("axes are 1-based and negative axes count from the end", {
  skip_if_no_backend()
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  expect_tensor(op_sum(m, axis = 1), colSums(m))
  expect_tensor(op_sum(m, axis = 2), rowSums(m))
  expect_tensor(op_sum(m, axis = -1), rowSums(m))
  expect_tensor(op_sum(m, axis = c(1, 2)), sum(m))
  expect_tensor(op_sum(m, axis = list(1L, 2L)), sum(m))
  expect_tensor(op_sum(m, axis = 2, keepdims = TRUE), matrix(rowSums(m)))
  expect_identical(dim(op_expand_dims(c(1, 2), -1)), c(2L, 1L))
  expect_identical(dim(op_expand_dims(c(1, 2), 1)), c(1L, 2L))
  expect_tensor(
    op_stack(list(c(1, 2), c(3, 4)), axis = 2),
    cbind(c(1, 2), c(3, 4))
  )
  expect_tensor(op_concatenate(list(m, m), axis = 2), cbind(m, m))
  expect_tensor(
    op_transpose(array(as.numeric(1:24), c(2, 3, 4)), c(3, 1, 2)),
    aperm(array(as.numeric(1:24), c(2, 3, 4)), c(3, 1, 2))
  )
  expect_tensor(op_softmax(m, axis = 1), sweep(exp(m), 2, colSums(exp(m)), "/"))
  expect_error(op_sum(m, axis = 0), class = "customgrad_error_axis_zero")
  expect_snapshot(op_sum(m, axis = 0), error = TRUE)
  expect_snapshot(op_diagonal(m, axis2 = 0), error = TRUE)
})

test_that("positions are 1-based in and out, 0-based with zero_indexed = TRUE", {
  skip_if_no_backend()
  v <- c(10, 30, 20)
  expect_tensor(op_take(v, c(1, 3)), c(10, 20))
  expect_tensor(op_take(v, c(0L, 2L), zero_indexed = TRUE), c(10, 20))
  expect_tensor(op_take(v, op_convert_to_tensor(c(1L, 3L))), c(10, 20))
  expect_tensor(op_argmax(v), 2)
  expect_tensor(op_argmax(v, zero_indexed = TRUE), 1)
  expect_tensor(op_argsort(v), order(v))
  expect_tensor(op_argsort(v, zero_indexed = TRUE), order(v) - 1)
  res <- op_top_k(v, 1, zero_indexed = TRUE)
  expect_tensor(res[[2]], 1)
  expect_tensor(op_one_hot(c(2L, 1L), 2), rbind(c(0, 1), c(1, 0)))
  expect_tensor(
    op_one_hot(c(1L, 0L), 2, zero_indexed = TRUE),
    rbind(c(0, 1), c(1, 0))
  )
  expect_tensor(op_one_hot(factor(c("b", "a")), 2), rbind(c(0, 1), c(1, 0)))
  # One row per non-zero element, in row-major order.
  expect_tensor(op_nonzero(rbind(c(0, 1), c(2, 0))), rbind(c(1, 2), c(2, 1)))
  expect_tensor(op_slice(v, 2, 2), c(30, 20))
  expect_tensor(op_scatter(matrix(c(1, 3)), c(5, 6), 4), c(5, 0, 6, 0))
  res <- op_unique(
    c(3, 1, 3),
    return_index = TRUE,
    return_inverse = TRUE,
    return_counts = TRUE
  )
  expect_tensor(res[[1]], c(1, 3))
  expect_tensor(res[[2]], c(2, 1))
  expect_tensor(res[[3]], c(2, 1, 2))
  expect_tensor(res[[4]], c(1, 2))
  branches <- list(function(x) x + 1, function(x) x - 1)
  expect_tensor(op_switch(1, branches, op_convert_to_tensor(1)), 2)
  expect_tensor(op_switch(2, branches, op_convert_to_tensor(1)), 0)
})

test_that("R numbers become the ints, shapes and tuples Python wants", {
  skip_if_no_backend()
  expect_identical(dim(op_zeros(c(2, 3))), c(2L, 3L))
  expect_identical(dim(op_ones(3)), 3L)
  expect_identical(dim(op_reshape(1:6, c(NA, 2))), c(3L, 2L))
  expect_identical(dim(op_reshape(1:6, list(3, NULL))), c(3L, 2L))
  expect_tensor(op_eye(2.0, k = 1.0), rbind(c(0, 1), c(0, 0)))
  expect_identical(op_dtype(op_full(c(2, 2), 1, dtype = "int32")), "int32")
  expect_tensor(op_tile(c(1, 2), c(2, 2)), rbind(c(1, 2, 1, 2), c(1, 2, 1, 2)))
  expect_tensor(
    op_pad(diag(2), rbind(c(1, 0), c(0, 1))),
    rbind(c(0, 0, 0), c(1, 0, 0), c(0, 1, 0))
  )
  expect_tensor(op_arange(3L), 1:3)
  expect_identical(op_dtype(op_arange(3L)), "int32")
  expect_tensor(op_arange(0, 1, 0.25), seq(0, 1, 0.25))
  expect_tensor(op_arange(5, 1, -2), seq(5, 1, -2))
  expect_tensor(op_arange(1, 4, include_end = FALSE), 1:3)
  expect_identical(op_dtype(op_arange(1, 3, dtype = "int32")), "int32")
})

test_that("R functions are callbacks, with R values and tensors as arguments", {
  skip_if_no_backend()
  offset <- 10
  expect_tensor(op_map(c(1, 2), function(x) x + offset), c(11, 12))
  expect_equal(as.numeric(op_fori_loop(0L, 3L, function(i, acc) acc + i, 0)), 3)
  res <- op_while_loop(
    function(i, x) i < 3,
    function(i, x) list(i + 1L, x * 2),
    list(0L, 1)
  )
  expect_length(res, 2)
  expect_equal(as.numeric(res[[2]]), 8)
  expect_error(op_map(c(1, 2), function(x) stop("boom in R")), "boom in R")
})

test_that("Python tuples come back as R lists of tensors", {
  skip_if_no_backend()
  sq <- matrix(c(4, 1, 1, 3), 2)
  for (res in list(
    op_qr(sq),
    op_svd(sq),
    op_eigh(sq),
    op_slogdet(sq),
    op_split(1:4, 2)
  )) {
    expect_type(res, "list")
    expect_null(names(res))
    for (x in res) {
      expect_true(inherits(x, "python.builtin.object"))
    }
  }
  expect_identical(op_shape(op_zeros(c(2, 3))), list(2L, 3L))
  expect_identical(op_ndim(op_zeros(c(2, 3))), 2L)
  expect_identical(op_is_tensor(op_zeros(2)), TRUE)
})

test_that("image ops default to the configured data format on every backend", {
  skip_if_no_backend()
  img <- array(0.5, c(1, 5, 5, 2))
  expect_equal(
    as.array(op_image_gaussian_blur(img))[1, 3, 3, ],
    c(0.5, 0.5),
    tolerance = 1e-6
  )
  chw <- aperm(img, c(1, 4, 2, 3))
  blurred <- op_image_gaussian_blur(chw, data_format = "channels_first")
  expect_equal(as.array(blurred)[1, , 3, 3], c(0.5, 0.5), tolerance = 1e-6)
})
