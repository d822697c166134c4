# R methods for JAX and PyTorch tensors, so that they behave as TensorFlow
# tensors do under the tensorflow R package: arithmetic (Ops), elementwise
# math (Math, including round(x, digits)), reductions (Summary, mean()),
# length(), dim(), conversion, and R-style 1-based `[` through
# keras3's op_subset(). Everything computes with keras.ops, so results stay
# on the backend and work on tracers inside jax$jit(). Printing, str() and
# summary() are in tensor-print.R.
#
# TensorFlow tensors keep tensorflow R's methods (the Math group method only
# covers the functions tensorflow R has none for, such as tanh()), and a
# method keras3 already gives a class (as.array(), t(), `^`, %*%, and str()
# for JAX arrays) is never replaced: see register_tensor_methods() in zzz.R.

#' R methods for JAX and PyTorch tensors
#'
#' The tensorflow R package gives TensorFlow tensors R methods (arithmetic,
#' math, `[`, printing); customgrad gives the same to the tensors of the
#' other two backends, so that R code on tensors runs alike on TensorFlow,
#' JAX and PyTorch: JAX arrays (and the tracers `jax$jit()` and
#' `jax$grad()` pass), PyTorch tensors, and for arithmetic and math the
#' Keras variables of those backends. Every method computes with
#' `keras.ops`, so results are tensors of the active backend, on JAX's
#' tracers too. A method that keras3, tensorflow or
#' reticulate already gives a class (keras3's `as.array()`, `t()`, `^` and
#' `%*%`) is kept, never replaced.
#'
#' The methods:
#'
#' * Arithmetic and comparison: `+`, `-`, `*`, `/`, `^`, `%%`, `%/%`, `==`,
#'   `!=`, `<`, `<=`, `>`, `>=`, `&`, `|`, `!`, between tensors, or with an
#'   R number, vector or array (of the tensor's dtype when both are
#'   floating point, as the tensorflow package does). An R operand holding
#'   `NA` is an error of class `customgrad_error_na`: tensors have no `NA`.
#' * Math: `abs()`, `sign()`, `sqrt()`, `floor()`, `ceiling()`, `trunc()`,
#'   `round(x, digits)`, `exp()`, `log(x, base)`, `expm1()`, `log1p()`,
#'   `log2()`, `log10()`, the trigonometric and hyperbolic functions and
#'   their inverses, `cospi()`, `sinpi()`, `tanpi()`, and `cumsum()` and
#'   `cumprod()` over the elements in R's order. Another R math function
#'   (`gamma()`, say) is an error of class `customgrad_error_unsupported_op`.
#'   TensorFlow tensors get the ones of these that the tensorflow package
#'   lacks (`tanh()`, `trunc()`, `cumsum()`, ...).
#' * Summaries: `sum()`, `prod()`, `max()`, `min()`, `range()`, `any()`,
#'   `all()` and `mean()` of all the elements, as tensors. `na.rm` is
#'   accepted and ignored.
#' * Shape: `dim()` (`integer(0)` for a scalar, `NA` for an unknown
#'   dimension) and `length()`.
#' * Conversion to R: `as.vector()`, `as.numeric()`, `as.double()`,
#'   `as.integer()`, `as.logical()`, `as.matrix()`; keras3 gives
#'   `as.array()`. They copy the values to R, so on a symbolic tensor
#'   (inside `jax$jit()` or a model), which has none yet, they are an error
#'   of class `customgrad_error_symbolic_tensor`.
#' * Subsetting: `x[i]`, `m[2, ]`, `x[x > 0]`: 1-based, with R's rules for
#'   missing indices and logical masks, through [keras3::op_subset()];
#'   `drop = FALSE` keeps the dimensions R keeps. A negative index counts
#'   from the end, as in Python and as the tensorflow package's `[` does:
#'   `x[-1]` is the last element, not all but the first.
#' * Printing: `print()` shows a header (backend, shape, dtype) and the
#'   values as R prints an array, in at most 20 lines: in full up to
#'   `getOption("customgrad.print_max", 200)` elements, else the corners
#'   (the first and last rows and columns of the first and last matrices),
#'   of which alone the values are copied to R. `format()` and `str()` give
#'   the header; `summary()` (also of a TensorFlow tensor) the header and
#'   R's summary of the values.
#'
#' @returns Each method returns what its generic returns for R values, as a
#'   tensor where the result is one: arithmetic, math, summaries and `[`
#'   give tensors; `dim()`, `length()` and the `as.*()` conversions give R
#'   vectors; `summary()` an object that prints the header and R's summary.
#' @seealso [keras3::op_subset()], [keras3::op_convert_to_tensor()],
#'   [keras3::op_convert_to_array()]; the tensorflow package's methods for
#'   TensorFlow tensors; [op_custom_gradient()], where they are traced.
#' @name tensor_methods
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' # The same code on TensorFlow, JAX and PyTorch tensors.
#' x <- op_convert_to_tensor(matrix(1:6, nrow = 2), "float32")
#' x * 2 + 1
#' exp(x) / sum(exp(x))
#' dim(x)
#' x[2, ] # 1-based, as R counts
#' as.numeric(mean(x))
#' summary(x)
#'
#' # A large tensor prints its corners.
#' op_ones(c(1000, 1000))
NULL

# The classes that get the methods: JAX arrays and tracers, torch tensors.
tensor_classes <- c("jax.Array", "jax._src.core.Tracer", "torch.Tensor")

# Keras variables of the JAX and PyTorch backends get the same Ops and Math
# methods: see keras_variable_classes (keras-internals.R).

# --- Ops ---------------------------------------------------------------------

ops_binary <- c(
  "+" = "add",
  "-" = "subtract",
  "*" = "multiply",
  "/" = "divide",
  "^" = "power",
  "%%" = "mod",
  "%/%" = "floor_divide",
  "==" = "equal",
  "!=" = "not_equal",
  "<" = "less",
  "<=" = "less_equal",
  ">" = "greater",
  ">=" = "greater_equal",
  "&" = "logical_and",
  "|" = "logical_or"
)

tensor_Ops <- function(e1, e2) { # nolint: object_name_linter.
  if (missing(e2)) {
    return(switch(
      .Generic,
      "+" = e1,
      "-" = call_op("negative", e1),
      "!" = call_op("logical_not", e1)
    ))
  }
  call_op(ops_binary[[.Generic]], as_operand(e1, e2), as_operand(e2, e1))
}

# An R operand of a tensor: a number goes to Python as a number (Keras keeps
# the tensor's dtype); a vector or array becomes a tensor, of the tensor's
# dtype when both are floating (as tensorflow R does for TensorFlow
# tensors), else as keras3's op_convert_to_tensor() makes it.
as_operand <- function(x, tensor) {
  if (!is.atomic(x)) {
    return(x)
  }
  if (anyNA(x)) {
    check_no_na(x, what = "An operand of a tensor operation", call = NULL)
  }
  if (length(x) <= 1L) {
    return(x)
  }
  dtype <- if (is.double(x)) tensor_dtype(tensor)
  if (!is.null(dtype) && !startsWith(dtype, "float")) {
    dtype <- NULL
  }
  keras3::op_convert_to_tensor(x, dtype = dtype)
}

# --- Math --------------------------------------------------------------------

math_ops <- c(
  abs = "abs",
  sign = "sign",
  sqrt = "sqrt",
  floor = "floor",
  ceiling = "ceil",
  trunc = "trunc",
  round = "round",
  exp = "exp",
  log = "log",
  expm1 = "expm1",
  log1p = "log1p",
  log2 = "log2",
  log10 = "log10",
  cos = "cos",
  sin = "sin",
  tan = "tan",
  acos = "arccos",
  asin = "arcsin",
  atan = "arctan",
  cosh = "cosh",
  sinh = "sinh",
  tanh = "tanh",
  acosh = "arccosh",
  asinh = "arcsinh",
  atanh = "arctanh",
  cospi = "cos",
  sinpi = "sin",
  tanpi = "tan",
  cumsum = "cumsum",
  cumprod = "cumprod"
)

tensor_Math <- function(x, ...) { # nolint: object_name_linter.
  name <- math_ops[.Generic]
  if (is.na(name)) {
    abort_customgrad(
      c(
        "Can't apply {.fn {(.Generic)}} to a tensor: keras.ops has no equivalent.",
        "i" = "Supported: {.fn {names(math_ops)}}."
      ),
      class = "unsupported_op",
      call = rlang::call2(.Generic, quote(x))
    )
  }
  dots <- list(...)
  switch(
    .Generic,
    log = if (length(dots) > 0) {
      return(call_op("divide", call_op("log", x), log(dots[[1]])))
    },
    round = if (length(dots) > 0) {
      return(call_op("round", x, decimals = as.integer(dots[[1]])))
    },
    cospi = ,
    sinpi = ,
    tanpi = return(call_op(name, call_op("multiply", x, pi))),
    # R's cumulative functions run over the elements in R's (column-major)
    # order, whatever the shape, and keep a float dtype (Keras' torch
    # cumsum() makes float64 float32).
    cumsum = ,
    cumprod = return(keep_float_dtype(call_op(name, column_major(x)), x))
  )
  call_op(name, x)
}

# --- Summary and mean() ------------------------------------------------------

# `y` cast to `x`'s dtype where both are floating and they differ.
keep_float_dtype <- function(y, x) {
  dtype <- tensor_dtype(x)
  if (startsWith(dtype, "float") && !identical(tensor_dtype(y), dtype)) {
    y <- call_op("cast", y, dtype)
  }
  y
}

# The elements of a tensor as a vector in R's (column-major) order.
column_major <- function(x) {
  rank <- length(tensor_shape(x))
  if (rank > 1L) {
    # Axes given: transpose() without them is torch's deprecated x.T.
    x <- call_op("transpose", x, as.list(rev(seq_len(rank) - 1L)))
  }
  call_op("reshape", x, -1L)
}

tensor_Summary <- function(..., na.rm = FALSE) { # nolint: object_name_linter.
  # na.rm is accepted for compatibility and ignored: tensors have no NA.
  parts <- lapply(list(...), function(x) {
    if (!reticulate::is_py_object(x)) {
      x <- keras3::op_convert_to_tensor(x)
    }
    if (.Generic == "range") {
      return(list(call_op("min", x), call_op("max", x)))
    }
    call_op(.Generic, x)
  })
  if (.Generic == "range") {
    low <- Reduce(
      function(a, b) call_op("minimum", a, b),
      lapply(parts, `[[`, 1)
    )
    high <- Reduce(
      function(a, b) call_op("maximum", a, b),
      lapply(parts, `[[`, 2)
    )
    return(call_op("stack", list(low, high)))
  }
  combine <- switch(
    .Generic,
    sum = "add",
    prod = "multiply",
    max = "maximum",
    min = "minimum",
    any = "logical_or",
    all = "logical_and"
  )
  Reduce(function(a, b) call_op(combine, a, b), parts)
}

tensor_mean <- function(x, ...) {
  call_op("mean", x)
}

# --- Shape, conversion, subsetting -------------------------------------------

tensor_length <- function(x) {
  prod(tensor_shape(x))
}

tensor_as_vector <- function(x, mode = "any") {
  as.vector(tensor_values(x), mode = mode)
}

tensor_as_double <- function(x, ...) tensor_as_vector(x, "double")
tensor_as_integer <- function(x, ...) tensor_as_vector(x, "integer")
tensor_as_logical <- function(x, ...) tensor_as_vector(x, "logical")
tensor_as_matrix <- function(x, ...) as.matrix(tensor_values(x), ...)

# R-style subsetting: 1-based, missing dimensions, logical masks (keras3's
# op_subset()). `drop = FALSE` keeps the dimensions R would keep: the
# result is reshaped to the lengths R's `[` selects along each axis.
tensor_subset <- function(x, ..., drop = TRUE) {
  out <- keras3::op_subset(x, ...)
  if (isTRUE(drop)) {
    return(out)
  }
  index <- rlang::dots_list(..., .ignore_empty = "none", .preserve_empty = TRUE)
  dims <- tensor_shape(x)
  if (length(index) != length(dims) || anyNA(dims)) {
    return(out)
  }
  kept <- vapply(
    seq_along(dims),
    function(k) {
      i <- index[[k]]
      if (rlang::is_missing(i)) dims[[k]] else length(seq_len(dims[[k]])[i])
    },
    1L
  )
  call_op("reshape", out, as.list(kept))
}

# --- Helpers shared with the rest of the package -----------------------------

# The static shape of any tensor (TensorFlow, JAX, torch, Keras) as an
# integer vector, NA for unknown dimensions.
tensor_shape <- function(x) {
  shape <- reticulate::py_get_attr(x, "shape")
  dims <- reticulate::py_to_r(reticulate::import_builtins()$tuple(shape))
  vapply(
    dims,
    function(d) {
      if (is.numeric(d) && length(d) == 1L) as.integer(d) else NA_integer_
    },
    1L
  )
}

tensor_dtype <- function(x) {
  dtype <- reticulate::py_get_attr(x, "dtype")
  reticulate::py_to_r(keras3::keras$backend$standardize_dtype(dtype))
}

# The values as an R array (a vector for a 1-d tensor, a number for a
# scalar); a classed error for a symbolic tensor, which has none.
tensor_values <- function(x, call = rlang::caller_env(2)) {
  values <- tryCatch(
    keras3::op_convert_to_array(x),
    error = function(cnd) {
      abort_customgrad(
        c(
          "Can't convert a symbolic tensor to an R value.",
          "i" = paste(
            "Inside {.code jax$jit()}, {.code tf.function} or a Keras model,",
            "tensors have no values yet;",
            "compute with tensor operations instead."
          )
        ),
        class = "symbolic_tensor",
        call = call,
        python_error = cnd
      )
    }
  )
  if (length(dim(values)) == 1L) {
    dim(values) <- NULL
  }
  values
}

# The methods, by generic.
tensor_methods <- function() {
  list(
    Ops = tensor_Ops,
    Math = tensor_Math,
    Summary = tensor_Summary,
    mean = tensor_mean,
    # like dim() of a TensorFlow tensor: integer(0) for a scalar
    dim = tensor_shape,
    length = tensor_length,
    as.vector = tensor_as_vector,
    as.double = tensor_as_double,
    as.numeric = tensor_as_double,
    as.integer = tensor_as_integer,
    as.logical = tensor_as_logical,
    as.matrix = tensor_as_matrix,
    `[` = tensor_subset,
    format = tensor_format,
    print = tensor_print,
    str = tensor_str,
    summary = tensor_summary
  )
}
