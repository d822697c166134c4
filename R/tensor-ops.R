# R methods for JAX and PyTorch tensors, so that they behave as TensorFlow
# tensors do under the tensorflow R package: arithmetic (Ops), elementwise
# math (Math, including round(x, digits)), reductions (Summary, mean()),
# length(), dim(), printing, conversion, and R-style 1-based `[` through
# keras3's op_subset(). Everything computes with keras.ops, so results stay
# on the backend and work on tracers inside jax$jit().
#
# TensorFlow tensors keep tensorflow R's methods (the Math group method only
# covers the functions tensorflow R has none for, such as tanh()), and a
# method keras3 already gives a class (as.array(), t(), `^`, %*%, and str()
# for JAX arrays) is never replaced: see register_tensor_methods() in zzz.R.

# The classes that get the methods: JAX arrays and tracers, torch tensors.
tensor_classes <- c("jax.Array", "jax._src.core.Tracer", "torch.Tensor")

# Keras variables of the JAX and PyTorch backends get the very same Ops and
# Math methods (and nothing else: they keep reticulate's printing). On R <
# 4.3, an operator whose two operands find different methods warns
# "Incompatible methods" and falls back to R's internal one unless the two
# methods are identical(): `w * tracer` in a constraint needs one method for
# both. TensorFlow variables are "tensorflow.tensor" first and find
# tensorflow R's methods, as TensorFlow tensors do.
keras_variable_classes <- c(
  "keras.src.backend.jax.core.JaxVariable",
  "keras.src.backend.torch.core.Variable"
)

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

tensor_Ops <- function(e1, e2) {
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

tensor_Math <- function(x, ...) {
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

tensor_Summary <- function(..., na.rm = FALSE) {
  # na.rm is accepted for compatibility and ignored: tensors have no NA.
  parts <- lapply(list(...), function(x) {
    if (!inherits(x, "python.builtin.object")) {
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

# --- Printing ----------------------------------------------------------------

tensor_format <- function(x, ...) {
  d <- tensor_shape(x)
  shape <- paste(ifelse(is.na(d), "?", d), collapse = ", ")
  sprintf(
    "<%s tensor shape(%s), dtype=%s>",
    backend_name(),
    shape,
    tensor_dtype(x)
  )
}

# The values as R prints an array, at most `customgrad.print_max`
# elements: leading slices along the first axis, the rest counted. Only
# the slices shown are copied to R.
tensor_print <- function(
  x,
  ...,
  max = getOption("customgrad.print_max", 200L)
) {
  cat(tensor_format(x), "\n", sep = "")
  shape <- tensor_shape(x)
  shown <- x
  omitted <- 0
  if (length(shape) >= 1 && !anyNA(shape) && prod(shape) > max) {
    per_slice <- prod(shape[-1])
    keep <- max(1, max %/% per_slice)
    omitted <- shape[[1]] - keep
    sizes <- as.list(as.integer(c(keep, shape[-1])))
    shown <- call_op("slice", x, as.list(integer(length(shape))), sizes)
  }
  values <- tryCatch(tensor_values(shown), error = function(cnd) NULL)
  if (is.null(values)) {
    cat("(symbolic: no values while tracing)\n")
    return(invisible(x))
  }
  print(values, max = max, ...)
  if (omitted > 0) {
    what <- if (length(shape) == 1) {
      "elements"
    } else {
      "slices along the first axis"
    }
    cat(sprintf(
      "[ %d more %s not shown; options(customgrad.print_max = ) shows more ]\n",
      as.integer(omitted),
      what
    ))
  }
  invisible(x)
}

tensor_str <- function(object, ...) {
  cat(tensor_format(object), "\n", sep = "")
  invisible()
}

# Shape, dtype and R's summary of the values.
tensor_summary <- function(object, ...) {
  structure(
    list(
      header = tensor_format(object),
      values = summary(as.vector(tensor_values(object)), ...)
    ),
    class = "customgrad_tensor_summary"
  )
}

#' @export
print.customgrad_tensor_summary <- function(x, ...) {
  cat(x$header, "\n", sep = "")
  print(x$values, ...)
  invisible(x)
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
