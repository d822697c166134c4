# Printing JAX and torch tensors (R/tensor-print.R) as tensorflow R prints
# TensorFlow's.

test_that("printing a tensor shows its values and its dtype", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3, 4))
  dtype <- op_dtype(x)
  out <- capture.output(printed <- print(x))
  expect_identical(printed, x)
  text <- paste(out, collapse = "\n")
  expect_match(text, dtype, fixed = TRUE)
  expect_match(text, "1\\.? +2\\.? +3\\.? +4")
  m <- op_convert_to_tensor(matrix(c(1.5, 2, 3, 4, 5, 6), 2))
  text <- paste(capture.output(print(m)), collapse = "\n")
  expect_match(text, "1\\.5")
  expect_match(text, "6")
})

test_that("str() and format() describe a tensor in one line", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3, 4))
  out <- capture.output(str(x))
  expect_length(out, 1)
  expect_match(out, op_dtype(x), fixed = TRUE)
  expect_match(out, "4")
  if (config_backend() != "tensorflow") {
    # (format() of a TensorFlow tensor is tensorflow R's business.)
    expect_match(format(x), op_dtype(x), fixed = TRUE)
    expect_match(format(x), "shape\\(4\\)")
  }
})

test_that("a large tensor prints its corners in at most 20 lines", {
  skip_if_no_backend()
  if (config_backend() == "tensorflow") {
    # tensorflow R's print method stays: NumPy's, truncating past 1000
    # elements.
    big <- op_convert_to_tensor(array(as.numeric(1:5000), c(500, 10)))
    out <- capture.output(print(big))
    expect_match(out[[1]], "^tf.Tensor\\(")
    expect_match(out, "...", fixed = TRUE, all = FALSE)
    expect_lt(length(out), 20)
    return(invisible())
  }
  withr::local_options(width = 80)
  header <- function(shape, dtype = "float32") {
    sprintf("<%s tensor shape(%s), dtype=%s>", config_backend(), shape, dtype)
  }

  # 1000 x 1000, element [i, j] = 1000 * (i - 1) + j: the corners.
  x <- op_reshape(op_arange(1, 1e6, dtype = "float32"), c(1000, 1000))
  out <- capture.output(printed <- print(x))
  expect_identical(printed, x)
  expect_lte(length(out), 20)
  expect_lte(max(nchar(out)), 80)
  expect_identical(out[[1]], header("1000, 1000"))
  expect_corner_row(out, "[1,]", c(1, 2, 3, 998, 999, 1000))
  expect_corner_row(
    out,
    "[1000,]",
    c(999001, 999002, 999003, 999998, 999999, 1e6)
  )
  expect_match(out[[2]], "[,1000]", fixed = TRUE)
  expect_false(any(grepl("[500,]", out, fixed = TRUE)))
  expect_identical(
    out,
    print_lines_of_corners(x, rows = c(1:5, 996:1000), cols = c(1:3, 998:1000))
  )

  # 3-d: the first and the last matrix, the others counted.
  a <- op_reshape(op_arange(1, 60000, dtype = "float32"), c(50, 40, 30))
  out <- capture.output(print(a))
  expect_lte(length(out), 20)
  expect_identical(out[[1]], header("50, 40, 30"))
  expect_identical(out[[2]], ", , 1")
  expect_identical(
    out[grepl("^, ,", out)],
    c(", , 1", ", , ... (28 more matrices)", ", , 30")
  )
  # Row-major: element [i, j, k] holds 1200 * (i - 1) + 30 * (j - 1) + k.
  value <- function(i, j, k) 1200 * (i - 1) + 30 * (j - 1) + k
  expect_corner_row(out[1:9], "[1,]", value(1, c(1:3, 38:40), 1))
  expect_corner_row(out[10:16], "[50,]", value(50, c(1:3, 38:40), 30))

  # A long vector: its first and last elements in one line.
  v <- op_arange(1, 10000, dtype = "float32")
  out <- capture.output(print(v))
  expect_identical(out[[1]], header("10000"))
  expect_length(out, 2)
  expect_match(
    out[[2]],
    "^\\[1\\] +1 +2 +3 +4 +5 \\.\\.\\. \\[9996\\] +9996 +9997 +9998 +9999 +10000$"
  )

  # Small tensors print in full, as R prints the array.
  m <- matrix(as.numeric(1:12), 3)
  out <- capture.output(print(op_convert_to_tensor(m, dtype = "float32")))
  expect_identical(out[-1], capture.output(print(m)))
  a <- array(as.numeric(1:24), c(2, 3, 4))
  out <- capture.output(print(op_convert_to_tensor(a, dtype = "float32")))
  expected <- capture.output(print(a))
  expect_identical(out[-1], expected[nzchar(expected)])
  expect_lte(length(out), 20)
  s <- capture.output(print(op_convert_to_tensor(2.5)))
  expect_identical(s[[2]], "[1] 2.5")
  expect_length(s, 2)

  # Tall, wide, and booleans.
  out <- capture.output(print(op_ones(c(5000, 2)) > 0))
  expect_lte(length(out), 20)
  expect_match(out[[1]], "dtype=bool", fixed = TRUE)
  expect_match(out[[length(out)]], "^\\[5000,\\] +TRUE +TRUE$")
  out <- capture.output(print(op_ones(c(2, 5000)) / 3))
  expect_length(out, 4)
  expect_lte(max(nchar(out)), 80)
})

test_that("summary() of a tensor is its header and R's summary of the values", {
  skip_if_no_backend()
  values <- c(4, 1, 3, 2, 10)
  x <- op_convert_to_tensor(values)
  s <- summary(x)
  expect_s3_class(s, "customgrad_tensor_summary")
  expect_equal(unclass(s$values), unclass(summary(values)))
  out <- capture.output(print(s))
  expect_length(out, 3)
  expect_match(out[[1]], "shape(5)", fixed = TRUE)
  expect_match(out[[2]], "Min.")
})

test_that("JAX and torch tensors print with customgrad's header and values", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(0.5, 2))
  out <- capture.output(print(x))
  if (config_backend() == "tensorflow") {
    # tensorflow R's print(), untouched.
    expect_match(out[[1]], "^tf.Tensor\\(\\[0.5 2. ?\\], shape=\\(2\\)")
    return()
  }
  expect_identical(
    out[[1]],
    sprintf("<%s tensor shape(2), dtype=%s>", config_backend(), op_dtype(x))
  )
  expect_identical(out[[2]], "[1] 0.5 2.0")
  s <- op_convert_to_tensor(3)
  out <- capture.output(print(s))
  expect_identical(
    out[[1]],
    sprintf("<%s tensor shape(), dtype=%s>", config_backend(), op_dtype(s))
  )
  expect_identical(out[[2]], "[1] 3")
})
