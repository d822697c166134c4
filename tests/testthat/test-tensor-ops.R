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
