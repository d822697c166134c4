test_that("arithmetic with R numbers on either side stays on the backend", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 4))
  expect_tensor(1 + x, c(2, 3, 5))
  expect_tensor(x * 2, c(2, 4, 8))
  expect_tensor(1 / x, c(1, 0.5, 0.25))
  expect_tensor(x - x, c(0, 0, 0))
  expect_tensor(-x, c(-1, -2, -4))
  expect_tensor(+x, c(1, 2, 4))
  expect_tensor(x^2, c(1, 4, 16))
  expect_tensor(2^x, c(2, 4, 16))
  expect_tensor(x %% 3, c(1, 2, 1))
  expect_tensor(x %/% 3, c(0, 0, 1))
  expect_tensor(c(1, 1, 1) + x, c(2, 3, 5))
  expect_identical(as.array(x > 1.5), array(c(FALSE, TRUE, TRUE)))
  expect_identical(as.vector(x == 2), c(FALSE, TRUE, FALSE))
  expect_identical(as.vector(x != 2), c(TRUE, FALSE, TRUE))
  expect_identical(as.vector(x <= 2), c(TRUE, TRUE, FALSE))
  expect_identical(as.vector(x >= 2), c(FALSE, TRUE, TRUE))
  expect_identical(as.vector(x < 2), c(TRUE, FALSE, FALSE))
  b <- x > 1.5
  expect_identical(as.vector(!b), c(TRUE, FALSE, FALSE))
  expect_identical(as.vector(b & c(TRUE, FALSE, TRUE)), c(FALSE, FALSE, TRUE))
  expect_identical(as.vector(b | c(TRUE, FALSE, FALSE)), c(TRUE, TRUE, TRUE))
  # The tensor's dtype wins over R's double.
  expect_identical(op_dtype(x * 2), "float32")
  expect_identical(op_dtype(x + c(1, 2, 3)), "float32")
})

test_that("R vectors and arrays broadcast like NumPy arrays", {
  skip_if_no_backend()
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  x <- op_convert_to_tensor(m)
  # A vector runs along the last axis (NumPy broadcasting, not recycling).
  expect_tensor(x + c(10, 20, 30), sweep(m, 2, c(10, 20, 30), "+"))
  expect_tensor(c(10, 20, 30) * x, sweep(m, 2, c(10, 20, 30), "*"))
  expect_tensor(x - matrix(c(1, 2), 2, 1), sweep(m, 1, c(1, 2), "-"))
  expect_tensor(x / m, matrix(1, 2, 3))
  i <- op_convert_to_tensor(1:3)
  expect_identical(op_dtype(i + 1L), "int32")
  expect_identical(as.vector(i * 2L), c(2L, 4L, 6L))
  expect_tensor(i + c(0.5, 0.5, 0.5), c(1.5, 2.5, 3.5))
})

test_that("Math and Summary dispatch to keras.ops", {
  skip_if_no_backend()
  v <- c(1, 2, 4)
  x <- op_convert_to_tensor(v)
  expect_tensor(exp(x), exp(v))
  expect_tensor(log(x), log(v))
  expect_tensor(log(x, 2), log2(v))
  expect_tensor(log(x, base = 10), log10(v))
  expect_tensor(sqrt(x), sqrt(v))
  expect_tensor(abs(-x), v)
  expect_tensor(sign(x - 2), sign(v - 2))
  expect_tensor(floor(x / 3), floor(v / 3))
  expect_tensor(ceiling(x / 3), ceiling(v / 3))
  expect_tensor(trunc(-x / 3), trunc(-v / 3))
  expect_tensor(round(x / 3, 2), round(v / 3, 2))
  expect_tensor(expm1(x), expm1(v))
  expect_tensor(log1p(x), log1p(v))
  expect_tensor(cos(x), cos(v))
  expect_tensor(sin(x), sin(v))
  expect_tensor(tan(x), tan(v))
  expect_tensor(tanh(x), tanh(v))
  expect_tensor(atan(x), atan(v))
  expect_tensor(acosh(x), acosh(v))
  expect_tensor(sinpi(x / 4), sinpi(v / 4))
  expect_tensor(cospi(x / 4), cospi(v / 4), tolerance = 1e-5)
  expect_tensor(cumsum(x), cumsum(v))
  expect_tensor(cumprod(x), cumprod(v))
  expect_tensor(cummax(op_convert_to_tensor(c(1, 3, 2))), c(1, 3, 3))
  expect_tensor(cummin(op_convert_to_tensor(c(3, 1, 2))), c(3, 1, 1))
  # R's cumulative functions run in R's element order on a matrix too.
  m <- matrix(c(1, 2, 3, 4, 5, 6), 2)
  expect_tensor(cumsum(op_convert_to_tensor(m)), cumsum(m))
  expect_equal(as.numeric(sum(x)), 7)
  expect_equal(as.numeric(sum(x, 1)), 8)
  expect_equal(as.numeric(prod(x)), 8)
  expect_equal(as.numeric(max(x)), 4)
  expect_equal(as.numeric(min(x, 0)), 0)
  expect_equal(as.numeric(range(x)), c(1, 4))
  expect_equal(as.numeric(range(x, c(-1, 10))), c(-1, 10))
  expect_true(as.logical(any(x > 3)))
  expect_false(as.logical(all(x > 3)))
  expect_equal(as.numeric(mean(x)), mean(v), tolerance = 1e-6)
})

test_that("R functions without a keras.ops equivalent are classed errors", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2))
  expect_error(gamma(x), class = "customgrad_error_unsupported_op")
  expect_snapshot(lgamma(x), error = TRUE)
})

test_that("conversion keeps values, shapes and element order", {
  skip_if_no_backend()
  m <- matrix(c(1.5, 2, 3, 4, 5, 6), 2)
  t <- op_convert_to_tensor(m)
  expect_identical(dim(t), c(2L, 3L))
  expect_identical(length(t), 6L)
  expect_equal(as.array(t), m)
  expect_equal(as.numeric(t), as.numeric(m))
  expect_equal(as.double(t), as.vector(m))
  expect_identical(as.integer(t), as.integer(m))
  # A 3-d array: element [i, j, k] is the same on both sides.
  a <- array(as.numeric(1:24), c(2, 3, 4))
  ta <- op_convert_to_tensor(a)
  expect_identical(dim(ta), c(2L, 3L, 4L))
  expect_identical(as.array(ta), a)
  expect_identical(as.array(ta)[2, 3, 4], a[2, 3, 4])
  expect_equal(as.numeric(op_slice(ta, c(2, 3, 4), c(1, 1, 1))), a[2, 3, 4])
  # Integers and logicals keep their type.
  i <- op_convert_to_tensor(array(1:6, c(3, 2)))
  expect_identical(as.array(i), array(1:6, c(3, 2)))
  expect_identical(as.vector(i), 1:6)
  l <- op_convert_to_tensor(c(TRUE, FALSE, TRUE))
  expect_identical(as.logical(l), c(TRUE, FALSE, TRUE))
  expect_identical(as.vector(l), c(TRUE, FALSE, TRUE))
  # A scalar has no dim; as.array() gives a length-one array.
  s <- op_convert_to_tensor(2.5)
  expect_null(dim(s))
  expect_identical(length(s), 1L)
  expect_identical(as.numeric(s), 2.5)
  expect_identical(as.array(s), array(2.5))
  # An empty vector.
  e <- op_convert_to_tensor(numeric(0))
  expect_identical(dim(e), 0L)
  expect_identical(as.numeric(e), numeric(0))
  # op_convert_to_array() and back.
  expect_identical(op_convert_to_array(op_convert_to_tensor(a)), a)
})

test_that("op_convert_to_tensor() gives R doubles Keras' float type and keeps integers", {
  skip_if_no_backend()
  keras <- reticulate::import("keras")
  floatx <- keras$config$floatx()
  expect_identical(op_dtype(op_convert_to_tensor(1.5)), floatx)
  expect_identical(op_dtype(op_convert_to_tensor(c(1.5, 2))), floatx)
  expect_identical(op_dtype(op_convert_to_tensor(matrix(1.5, 2, 2))), floatx)
  expect_identical(op_dtype(op_convert_to_tensor(1L)), "int32")
  expect_identical(op_dtype(op_convert_to_tensor(1:3)), "int32")
  expect_identical(op_dtype(op_convert_to_tensor(TRUE)), "bool")
  expect_identical(
    op_dtype(op_convert_to_tensor(c(1, 2), dtype = "float16")),
    "float16"
  )
  expect_identical(
    op_dtype(op_convert_to_tensor(1:3, dtype = "float32")),
    "float32"
  )
  # Doubles with an integer dtype are converted first, not rejected.
  t <- op_convert_to_tensor(c(1, 2), dtype = "int32")
  expect_identical(op_dtype(t), "int32")
  expect_identical(as.vector(t), c(1L, 2L))
  # A tensor passes through.
  expect_identical(op_dtype(op_convert_to_tensor(t)), "int32")
  # Doubles passed straight to an op become Keras' float type as well.
  expect_identical(op_dtype(op_exp(c(1, 2))), floatx)
  # With another floatx, doubles follow it.
  old <- keras$config$floatx()
  keras$config$set_floatx("float16")
  withr::defer(keras$config$set_floatx(old))
  expect_identical(op_dtype(op_convert_to_tensor(c(1.5, 2))), "float16")
})

test_that("every tensor class does arithmetic, conversion and printing", {
  skip_if_no_backend()
  keras <- reticulate::import("keras", convert = FALSE)
  backend <- config_backend()
  objects <- list(
    tensor = op_convert_to_tensor(c(1, 2)),
    keras_variable = keras$Variable(op_convert_to_tensor(c(1, 2)))
  )
  objects$native <- switch(
    backend,
    tensorflow = reticulate::import("tensorflow", convert = FALSE)$Variable(
      c(1, 2),
      dtype = "float32"
    ),
    jax = reticulate::import("jax.numpy", convert = FALSE)$asarray(
      c(1, 2),
      dtype = "float32"
    ),
    torch = reticulate::import("torch", convert = FALSE)$tensor(
      c(1, 2),
      requires_grad = TRUE
    )
  )
  for (name in names(objects)) {
    x <- objects[[name]]
    expect_tensor(x + 1, c(2, 3))
    expect_tensor(2 * x, c(2, 4))
    expect_tensor(exp(x), exp(c(1, 2)))
    expect_equal(as.numeric(sum(x)), 3)
    expect_equal(as.numeric(x), c(1, 2))
    expect_identical(dim(x), 2L)
    expect_identical(length(x), 2L)
    expect_match(format(x), "shape (2), float32", fixed = TRUE)
  }
  expect_match(
    format(objects$keras_variable),
    paste0("<", backend, " variable"),
    fixed = TRUE
  )
  # Tensors of different classes mix without "Incompatible methods".
  for (a in objects) {
    for (b in objects) {
      expect_warning(res <- a + b, NA)
      expect_tensor(res, c(2, 4))
      expect_warning(res <- a > b, NA)
      expect_identical(as.vector(res), c(FALSE, FALSE))
    }
  }
})

test_that("tensor methods work on tracers inside the backend's compilers", {
  skip_if_no_backend()
  x <- op_convert_to_tensor(c(1, 2, 3))
  f <- function(x) sum(x^2 + 2 * x) / 2 + mean(exp(x) * c(0, 0, 0))
  seen <- NULL
  g <- function(x) {
    seen <<- c(seen, class(x)[[1]])
    out <- capture.output(print(x))
    seen <<- c(seen, out[[2]])
    x * 2 + cumsum(x) - max(x)
  }
  switch(
    config_backend(),
    jax = {
      jax <- reticulate::import("jax", convert = FALSE)
      grad <- reticulate::py_call(jax$grad(f), x)
      expect_tensor(grad, c(2, 3, 4))
      res <- reticulate::py_call(jax$jit(g), x)
      expect_tensor(res, c(0, 4, 9))
      expect_match(seen[[1]], "Tracer")
      expect_identical(seen[[2]], "(symbolic: no values while tracing)")
      expect_error(
        reticulate::py_call(jax$jit(function(x) as.array(x)), x),
        "symbolic tensor"
      )
    },
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      tape <- tf$GradientTape()
      tape$`__enter__`()
      tape$watch(x)
      y <- f(x)
      tape$`__exit__`(NULL, NULL, NULL)
      expect_tensor(tape$gradient(y, x), c(2, 3, 4))
      res <- reticulate::py_call(tf$`function`(g, autograph = FALSE), x)
      expect_tensor(res, c(0, 4, 9))
      expect_match(seen[[1]], "SymbolicTensor")
      expect_identical(seen[[2]], "(symbolic: no values while tracing)")
    },
    torch = {
      torch <- reticulate::import("torch", convert = FALSE)
      xt <- torch$tensor(c(1, 2, 3), requires_grad = TRUE)
      f(xt)$backward()
      expect_tensor(xt$grad, c(2, 3, 4))
      res <- reticulate::py_call(torch$func$vmap(g), op_reshape(x, c(3, 1)))
      expect_tensor(res, matrix(c(2, 4, 6), 3))
      expect_identical(seen[[1]], "torch.Tensor")
    }
  )
})

test_that("symbolic Keras tensors keep shapes but have no values", {
  skip_if_no_backend()
  keras <- reticulate::import("keras", convert = FALSE)
  kt <- keras$KerasTensor(reticulate::tuple(NULL, 3L))
  y <- exp(kt * 2) + c(1, 2, 3)
  expect_true(inherits(y, "keras.src.backend.common.keras_tensor.KerasTensor"))
  expect_identical(dim(y), c(NA, 3L))
  expect_match(format(y), "shape (?, 3), float32", fixed = TRUE)
  expect_output(print(y), "symbolic: no values", fixed = TRUE)
  expect_error(as.array(y), class = "customgrad_error_symbolic_tensor")
})

test_that("print() and format() show backend, shape, dtype and values", {
  skip_if_no_backend()
  out <- capture.output(print(op_convert_to_tensor(c(1, 2))))
  expect_identical(
    out[[1]],
    sprintf("<%s tensor, shape (2), float32>", config_backend())
  )
  expect_identical(out[[2]], "[1] 1 2")
  out <- capture.output(print(op_convert_to_tensor(matrix(1:4, 2))))
  expect_identical(
    out[[1]],
    sprintf("<%s tensor, shape (2, 2), int32>", config_backend())
  )
  expect_identical(out[-1], capture.output(print(matrix(1:4, 2))))
  out <- capture.output(print(op_convert_to_tensor(TRUE)))
  expect_identical(
    out,
    c(sprintf("<%s tensor, scalar, bool>", config_backend()), "[1] TRUE")
  )
  expect_identical(
    format(op_zeros(c(2, 3, 4))),
    sprintf("<%s tensor, shape (2, 3, 4), float32>", config_backend())
  )
})
