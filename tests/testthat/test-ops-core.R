# The R conventions of customgrad's op_*() wrappers (keras3's, for the
# keras.ops functions keras3 lacks): tensor arguments as reticulate converts
# them, 1-based axes and positions, R integers for Python ints, R functions
# as callbacks, R lists for Python tuples.

test_that("tensor arguments reach Keras as reticulate converts them", {
  skip_if_no_backend()
  # No cast to Keras' float type: the dtype is the one Keras gives the
  # value itself (a Python list of floats, a NumPy array, ints, a float).
  for (x in list(c(1.5, -2), matrix(c(1.5, -2), 1), c(1L, -2L), 2.5)) {
    expect_identical(
      op_dtype(op_absolute(x)),
      op_dtype(keras$ops$convert_to_tensor(x))
    )
  }
  expect_identical(op_dtype(op_absolute(c(1L, -2L))), "int32")
  expect_identical(op_dtype(op_absolute(c(1.5, -2))), config_floatx())
  x <- op_convert_to_tensor(c(1.5, -2), dtype = "float16")
  expect_identical(op_dtype(op_absolute(x)), "float16")
  # Where Keras takes backend tensors only, R values are converted first.
  expect_tensor(op_vander(c(1, 2)), rbind(c(1, 1), c(2, 1)))
  expect_tensor(op_dstack(list(1, 2)), array(c(1, 2), c(1, 1, 2)))
})

test_that("axes are 1-based and negative axes count from the end", {
  skip_if_no_backend()
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  expect_tensor(op_nansum(m, axis = 1), colSums(m))
  expect_tensor(op_nansum(m, axis = 2), rowSums(m))
  expect_tensor(op_nansum(m, axis = -1), rowSums(m))
  expect_tensor(op_nansum(m, axis = c(1, 2)), sum(m))
  expect_tensor(op_nansum(m, axis = list(1L, 2L)), sum(m))
  expect_tensor(op_amax(m, axis = 2, keepdims = TRUE), matrix(c(5, 6)))
  expect_tensor(op_nancumsum(m, axis = 2), t(apply(m, 1, cumsum)))
  # trapezoid() integrates along the last axis unless told otherwise.
  expect_tensor(op_trapezoid(m), rowSums(m[, -1] + m[, -3]) / 2)
  expect_tensor(op_trapezoid(m, axis = 1), colSums(m) / 2)
  expect_error(op_nansum(m, axis = 0), class = "customgrad_error_axis_zero")
  expect_snapshot(op_nansum(m, axis = 0), error = TRUE)
  img <- array(seq_len(48) / 48, c(1, 4, 4, 3))
  expect_snapshot(
    op_image_scale_and_translate(
      img,
      c(1, 4, 4, 3),
      c(1, 1),
      c(0, 0),
      c(0, 1),
      "linear"
    ),
    error = TRUE
  )
})

test_that("positions are 1-based in and out, 0-based with zero_indexed = TRUE", {
  skip_if_no_backend()
  v <- c(10, NaN, 30, 20)
  expect_tensor(op_nanargmax(v), 3)
  expect_tensor(op_nanargmax(v, zero_indexed = TRUE), 2)
  expect_tensor(op_nanargmin(matrix(c(3, 1, 2, 4), 2), axis = 1), c(2, 1))
  expect_tensor(
    op_segment_min(c(5, 1, 7), c(2, 1, 2), num_segments = 2),
    c(1, 5)
  )
  ids <- op_convert_to_tensor(c(2L, 1L, 2L))
  expect_tensor(op_segment_prod(c(5, 1, 7), ids, num_segments = 2), c(1, 35))
  # Split positions are where new pieces start.
  m <- matrix(as.numeric(1:12), 3)
  res <- op_vsplit(m, c(2, 3))
  expect_length(res, 3)
  expect_tensor(res[[2]], m[2, , drop = FALSE])
  res <- op_hsplit(m, op_convert_to_tensor(array(3L)))
  expect_length(res, 2)
  expect_tensor(res[[2]], m[, 3:4])
})

test_that("R numbers become the ints and shapes Python wants", {
  skip_if_no_backend()
  expect_tensor(op_geomspace(1, 8, 4.0), c(1, 2, 4, 8))
  expect_tensor(op_vander(c(1, 2, 3), N = 2.0), cbind(c(1, 2, 3), 1))
  expect_tensor(
    op_adaptive_max_pool(array(as.numeric(1:4), c(1, 4, 1)), 2.0),
    array(c(2, 4), c(1, 2, 1))
  )
  expect_tensor(
    op_segment_min(c(1, 2), c(1, 2), num_segments = 2.0),
    c(1, 2)
  )
  img <- array(seq_len(48) / 48, c(1, 4, 4, 3))
  res <- op_image_scale_and_translate(
    img,
    c(1, 2, 2, 3),
    c(0.5, 0.5),
    c(0, 0),
    c(2, 3),
    "linear",
    antialias = FALSE
  )
  expect_identical(dim(op_convert_to_array(res)), c(1L, 2L, 2L, 3L))
})

test_that("R functions are callbacks, with tensors as arguments", {
  skip_if_no_backend()
  offset <- 10
  res <- op_jvp(
    function(x) x * x + offset,
    list(op_convert_to_tensor(3)),
    list(op_convert_to_tensor(1))
  )
  expect_tensor(res[[1]], 19)
  expect_tensor(res[[2]], 6)
  expect_error(
    op_jvp(
      function(x) stop("boom in R"),
      list(op_convert_to_tensor(3)),
      list(op_convert_to_tensor(1))
    ),
    "boom in R"
  )
})

test_that("Python tuples and lists come back as R lists of tensors", {
  skip_if_no_backend()
  m <- matrix(as.numeric(1:8), 2)
  for (res in list(
    op_array_split(c(1, 2, 3), 2),
    op_hsplit(m, 2),
    op_vsplit(m, 2),
    op_dsplit(array(m, c(1, 2, 4)), 2),
    op_unique(c(3, 1, 3), return_counts = TRUE),
    op_jvp(
      function(x) x * 2,
      list(op_convert_to_tensor(1)),
      list(op_convert_to_tensor(1))
    )
  )) {
    expect_type(res, "list")
    expect_null(names(res))
    for (x in res) {
      expect_true(inherits(x, "python.builtin.object"))
    }
  }
})

test_that("image ops default to the configured data format on every backend", {
  skip_if_no_backend()
  img <- array(0.5, c(1, 5, 5, 2))
  res <- op_convert_to_array(op_image_sobel_edges(img))
  expect_identical(dim(res), c(1L, 5L, 5L, 2L, 2L))
  expect_equal(res[1, 2:4, 2:4, , ], array(0, c(3, 3, 2, 2)), tolerance = 1e-6)
  chw <- aperm(img, c(1, 4, 2, 3))
  res <- op_image_sobel_edges(chw, data_format = "channels_first")
  expect_identical(dim(op_convert_to_array(res)), c(1L, 2L, 5L, 5L, 2L))
})
