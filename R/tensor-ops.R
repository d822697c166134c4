# Backend tensors behave like R values: arithmetic (Ops), elementwise math
# (Math), reductions (Summary), conversion and printing. reticulate < 1.42
# defines none of these for Python objects. One function per group serves
# every tensor class, so mixing classes in `x + y` dispatches cleanly.

# Classes that get the methods (registered in NAMESPACE via roxygen): TF
# tensors and variables, JAX arrays and tracers, torch tensors, Keras
# variables and symbolic Keras tensors.
tensor_classes <- c(
  "tensorflow.python.types.core.Tensor",
  "jax.Array",
  "torch.Tensor",
  "keras.src.backend.common.variables.Variable",
  "keras.src.backend.common.keras_tensor.KerasTensor"
)

ops_binary <- c(
  "+" = "add", "-" = "subtract", "*" = "multiply", "/" = "divide",
  "^" = "power", "%%" = "mod", "%/%" = "floor_divide",
  "==" = "equal", "!=" = "not_equal", "<" = "less", "<=" = "less_equal",
  ">" = "greater", ">=" = "greater_equal",
  "&" = "logical_and", "|" = "logical_or"
)

tensor_Ops <- function(e1, e2) {
  if (missing(e2)) {
    return(switch(.Generic,
      "+" = e1,
      "-" = call_op("negative", e1),
      "!" = call_op("logical_not", e1)
    ))
  }
  e1 <- as_operand(e1, e2)
  e2 <- as_operand(e2, e1)
  call_op(ops_binary[[.Generic]], e1, e2)
}

# An R operand of a tensor operation: a single number goes to Python as a
# number (Keras keeps the tensor's dtype); vectors and arrays become tensors
# of the other operand's floating dtype, so they broadcast like numbers.
as_operand <- function(x, other) {
  if (inherits(x, "python.builtin.object") || (length(x) == 1 && is.null(dim(x)))) {
    return(x)
  }
  dtype <- if (is.double(x) && inherits(other, "python.builtin.object")) {
    other_dtype <- tensor_dtype(other)
    if (grepl("float", other_dtype)) other_dtype
  }
  op_convert_to_tensor(x, dtype = dtype)
}

math_ops <- c(
  abs = "abs", sign = "sign", sqrt = "sqrt", floor = "floor",
  ceiling = "ceil", trunc = "trunc", round = "round", exp = "exp",
  log = "log", expm1 = "expm1", log1p = "log1p", log2 = "log2",
  log10 = "log10", cos = "cos", sin = "sin", tan = "tan", acos = "arccos",
  asin = "arcsin", atan = "arctan", cosh = "cosh", sinh = "sinh",
  tanh = "tanh", acosh = "arccosh", asinh = "arcsinh", atanh = "arctanh",
  cumsum = "cumsum", cumprod = "cumprod", lgamma = "lgamma",
  digamma = "digamma"
)

tensor_Math <- function(x, ...) {
  name <- math_ops[.Generic]
  if (is.na(name)) {
    abort_customgrad(
      c(
        "Can't apply {.fn {(.Generic)}} to a tensor.",
        "i" = "Supported: {.fn {names(math_ops)}}."
      ),
      class = "unsupported_op",
      call = rlang::caller_env()
    )
  }
  dots <- list(...)
  if (.Generic == "log" && length(dots) > 0) {
    return(call_op("log", x) / log(dots[[1]]))
  }
  if (.Generic == "round" && length(dots) > 0) {
    return(call_op("round", x, decimals = as.integer(dots[[1]])))
  }
  if (.Generic %in% c("cumsum", "cumprod")) {
    return(call_op(name, call_op("reshape", x, -1L)))
  }
  call_op(name, x)
}

summary_ops <- c(
  sum = "sum", prod = "prod", max = "max", min = "min", any = "any",
  all = "all"
)

tensor_Summary <- function(..., na.rm = FALSE) {
  parts <- lapply(list(...), function(x) {
    if (!inherits(x, "python.builtin.object")) x <- op_convert_to_tensor(x)
    if (.Generic == "range") {
      return(list(call_op("min", x), call_op("max", x)))
    }
    call_op(summary_ops[[.Generic]], x)
  })
  if (.Generic == "range") {
    lows <- lapply(parts, `[[`, 1)
    highs <- lapply(parts, `[[`, 2)
    return(call_op("stack", list(
      Reduce(function(a, b) call_op("minimum", a, b), lows),
      Reduce(function(a, b) call_op("maximum", a, b), highs)
    )))
  }
  combine <- switch(.Generic,
    sum = "add", prod = "multiply", max = "maximum", min = "minimum",
    any = "logical_or", all = "logical_and"
  )
  Reduce(function(a, b) call_op(combine, a, b), parts)
}

# --- Conversion ------------------------------------------------------------

tensor_as_array <- function(x, ...) {
  value <- reticulate::py_to_r(call_op("convert_to_numpy", x))
  if (is.null(dim(value))) {
    dim(value) <- length(value)
  }
  value
}

tensor_as_vector <- function(x, mode = "any") {
  as.vector(reticulate::py_to_r(call_op("convert_to_numpy", x)), mode = mode)
}

tensor_as_double <- function(x, ...) tensor_as_vector(x, "double")
tensor_as_integer <- function(x, ...) tensor_as_vector(x, "integer")
tensor_as_logical <- function(x, ...) tensor_as_vector(x, "logical")

tensor_dim <- function(x) {
  shape <- reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$tuple(x$shape))
  if (length(shape) == 0) {
    return(NULL)
  }
  vapply(shape, function(d) if (is.null(d)) NA_integer_ else as.integer(d), 1L)
}

tensor_length <- function(x) {
  d <- tensor_dim(x)
  if (is.null(d)) 1L else prod(d)
}

tensor_dtype <- function(x) {
  reticulate::py_to_r(keras_module()$backend$standardize_dtype(x$dtype))
}

# --- Printing --------------------------------------------------------------

tensor_format <- function(x, ...) {
  d <- tensor_dim(x)
  shape <- if (is.null(d)) "scalar" else paste0("shape (", paste(ifelse(is.na(d), "?", d), collapse = ", "), ")")
  sprintf("<%s tensor, %s, %s>", config_backend(), shape, tensor_dtype(x))
}

tensor_print <- function(x, ...) {
  cat(tensor_format(x), "\n", sep = "")
  values <- tryCatch(tensor_as_array(x), error = function(cnd) NULL)
  if (is.null(values)) {
    cat("(symbolic: no values while tracing)\n")
  } else {
    if (is.null(tensor_dim(x))) dim(values) <- NULL
    print(values, ...)
  }
  invisible(x)
}
