# R expressions on backend tensors give what they give on R arrays.
# TensorFlow tensors use tensorflow R's methods; JAX and torch tensors
# customgrad's (R/tensor-ops.R) next to keras3's (as.array(), t(), `^`).

test_that("R expressions on tensors match the same expressions on R arrays", {
  skip_if_no_backend()
  # tensorflow R warns, by design, when `[` gets a tensor index (x[x > 2]);
  # that is its documented behaviour, not the subject here.
  withr::local_options(tensorflow.extract.warn_tensors_passed_asis = FALSE)
  r_env <- list2env(list(
    x = c(1, 2, 3, 4),
    m = matrix(c(1, 2, 3, 4, 5, 6), 2),
    a = array(as.numeric(1:24), c(2, 3, 4))
  ))
  tensor_env <- list2env(lapply(as.list(r_env), op_convert_to_tensor))
  # x[-1] is not here: op_subset() (JAX, torch) and tensorflow R's `[` both
  # read negative indices Python-style (see the test below).
  cases <- c(
    # subsetting (1-based)
    "x[1]",
    "x[2:3]",
    "x[x > 2]",
    "m[2, ]",
    "m[, 2]",
    "m[1, 2]",
    "m[2, , drop = FALSE]",
    "a[2, 3, 4]",
    "a[, 2, ]",
    # shape
    "length(x)",
    "dim(m)",
    "dim(a)",
    # Math (round(x, digits) is below: tensorflow R's round() has no digits)
    "round(x / 3)",
    "exp(x)",
    "log(x)",
    "log(x, 2)",
    "sqrt(x)",
    "abs(-x)",
    "cumsum(m)",
    "cumsum(a)",
    "cumprod(x)",
    # Summary and mean()
    "sum(x)",
    "mean(x)",
    "max(x)",
    "min(x)",
    "prod(x)",
    "range(x)",
    "sum(a)",
    "mean(m)",
    # Ops
    "x + 1",
    "1 - x",
    "x * x",
    "x / 2",
    "x^2",
    "x %% 2",
    "x > 2",
    "-x",
    # conversion and keras3's methods
    "t(m)",
    "as.matrix(m)",
    "as.numeric(x)",
    "as.array(m)"
  )
  backend <- config_backend()
  for (code in cases) {
    expected <- eval(parse(text = code)[[1]], r_env)
    result <- eval_code(code, tensor_env)
    if (inherits(result, "condition")) {
      fail(sprintf(
        "`%s` fails on %s: %s",
        code,
        backend,
        conditionMessage(result)
      ))
      next
    }
    actual <- r_value_of(result)
    label <- sprintf("`%s` on %s", code, backend)
    expect_equal(
      as.vector(actual),
      as.vector(expected),
      tolerance = 1e-6,
      label = label
    )
    expect_identical(
      as.integer(r_shape_of(actual)),
      as.integer(r_shape_of(expected)),
      label = paste("shape of", label)
    )
  }
})

test_that("round(x, digits) on JAX and torch; tensorflow R's round() has no digits", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3, 4))
  if (config_backend() == "tensorflow") {
    # TensorFlow tensors keep tensorflow R's methods, limits included.
    expect_error(round(x / 3, 2), "rounding to integers")
  } else {
    expect_equal(
      as.vector(as.array(round(x / 3, 2))),
      round(c(1, 2, 3, 4) / 3, 2),
      tolerance = 1e-6
    )
  }
})

test_that("results that R gives as plain values are plain R values", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3, 4))
  m <- op_convert_to_tensor(matrix(c(1, 2, 3, 4, 5, 6), 2))
  expect_equal(length(x), 4)
  expect_equal(dim(m), c(2L, 3L))
  expect_equal(dim(op_convert_to_tensor(5)), integer(0))
  expect_identical(as.numeric(x), c(1, 2, 3, 4))
  expect_identical(as.matrix(m), matrix(c(1, 2, 3, 4, 5, 6), 2))
  expect_identical(as.array(m), matrix(c(1, 2, 3, 4, 5, 6), 2))
})

test_that("x[1] is the first element (1-based) on every backend", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(10, 20, 30))
  expect_equal(as.vector(as.array(x[1])), 10)
  expect_equal(as.vector(as.array(x[3])), 30)
  expect_equal(as.vector(as.array(x[2:3])), c(20, 30))
  m <- op_convert_to_tensor(matrix(c(1, 2, 3, 4, 5, 6), 2))
  expect_equal(as.vector(as.array(m[1, 1])), 1)
  expect_equal(as.vector(as.array(m[2, 3])), 6)
})

test_that("a negative index counts from the end, Python-style, on every backend", {
  skip_if_no_backend()
  # Unlike R (x[-1] drops the first element), op_subset() and tensorflow R's
  # `[` both document this; tensorflow R warns about it unless told not to.
  withr::local_options(tensorflow.extract.warn_negatives_pythonic = FALSE)
  x <- op_convert_to_tensor(c(10, 20, 30))
  expect_equal(as.vector(as.array(x[-1])), 30)
  expect_equal(as.vector(as.array(x[-2])), 20)
})

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

test_that("cumsum() and cumprod() run without Python warnings", {
  skip_if_no_callr()
  skip_if_no_backend()
  # In a fresh process: PyTorch raises some warnings once per process only.
  # R's element order comes from reversing the axes first; PyTorch
  # deprecates (and will reject) x.T on tensors that are not matrices.
  record <- python_warnings_during
  environment(record) <- globalenv()
  result <- run_in_fresh_r(
    function(python_warnings_during) {
      library(customgrad)
      x <- op_convert_to_tensor(c(1, 2, 3))
      a <- op_convert_to_tensor(array(as.numeric(1:8), c(2, 2, 2)))
      list(
        vector_sum = python_warnings_during(cumsum(x)),
        vector_prod = python_warnings_during(cumprod(x)),
        array_sum = python_warnings_during(cumsum(a)),
        values = as.vector(as.array(cumsum(a)))
      )
    },
    list(python_warnings_during = record)
  )
  expect_identical(result$vector_sum, character())
  expect_identical(result$vector_prod, character())
  expect_identical(result$array_sum, character())
  expect_equal(result$values, cumsum(1:8))
})

test_that("cumsum() keeps the tensor's dtype", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3))
  expect_identical(op_dtype(cumsum(x)), op_dtype(x))
  m <- op_convert_to_tensor(matrix(c(1, 2, 3, 4), 2))
  expect_identical(op_dtype(cumsum(m)), op_dtype(m))
})

test_that("TensorFlow tensors keep tensorflow R's methods; JAX and torch get methods", {
  skip_if_no_backend()
  backend <- config_backend()
  # tensorflow R registers a method per operator; customgrad group methods.
  generics <- if (backend == "tensorflow") {
    c("[", "+", "exp", "sum", "dim", "length", "print")
  } else {
    c("[", "Ops", "Math", "Summary", "dim", "length", "print")
  }
  class <- switch(
    backend,
    tensorflow = "tensorflow.tensor",
    jax = "jax.Array",
    torch = "torch.Tensor"
  )
  owners <- vapply(
    generics,
    function(generic) {
      method <- utils::getS3method(generic, class, optional = TRUE)
      if (is.null(method)) {
        NA_character_
      } else {
        environmentName(environment(method))
      }
    },
    ""
  )
  expected <- if (backend == "tensorflow") "tensorflow" else "customgrad"
  expect_identical(unname(owners), rep(expected, length(generics)))
})

test_that("an R function with no keras.ops equivalent is a classed error", {
  skip_if_no_backend()
  # TensorFlow too: customgrad's Math method fills tensorflow R's gaps.
  x <- op_convert_to_tensor(c(1, 2, 3))
  expect_error(gamma(x), class = "customgrad_error_unsupported_op")
  expect_error(cummax(x), class = "customgrad_error_unsupported_op")
})
