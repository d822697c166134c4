# Backend tensors behave like R values: arithmetic (Ops), elementwise math
# (Math), reductions (Summary, mean()), conversion and printing. reticulate
# < 1.42 defines none of these for Python objects. One function per generic
# serves every tensor class (registered by register_tensor_methods() in
# zzz.R), so mixing classes in `x + y` dispatches without R's "Incompatible
# methods" warning. Everything dispatches to keras.ops, so results stay on
# the backend and work on tracers inside jax$jit() and tf.function.

# Classes that get the methods: TF tensors (eager and symbolic) and
# variables, JAX arrays and tracers, torch tensors, Keras variables and
# symbolic Keras tensors.
tensor_classes <- c(
  "tensorflow.python.types.core.Tensor",
  "jax.Array",
  "torch.Tensor",
  "keras.src.backend.common.variables.Variable",
  "keras.src.backend.common.keras_tensor.KerasTensor"
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
  e1 <- as_operand(e1, e2)
  e2 <- as_operand(e2, e1)
  call_op(ops_binary[[.Generic]], e1, e2)
}

# An R operand of a tensor operation: a single number goes to Python as a
# number (Keras keeps the tensor's dtype); vectors and arrays become tensors
# (of the other operand's float dtype when both are floating) and broadcast
# like NumPy arrays.
as_operand <- function(x, other) {
  if (
    inherits(x, c("python.builtin.object", "customgrad_deferred")) ||
      (length(x) == 1L && is.null(dim(x)))
  ) {
    return(x)
  }
  dtype <- if (
    is.double(x) &&
      inherits(other, c("python.builtin.object", "customgrad_deferred"))
  ) {
    other_dtype <- tensor_dtype(other)
    if (grepl("float", other_dtype, fixed = TRUE)) other_dtype
  }
  op_convert_to_tensor(x, dtype = dtype)
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
  cumprod = "cumprod",
  cummax = "maximum",
  cummin = "minimum"
)

tensor_Math <- function(x, ...) {
  name <- math_ops[.Generic]
  if (is.na(name)) {
    abort_customgrad(
      c(
        paste(
          "Can't apply {.fn {(.Generic)}} to a tensor:",
          "keras.ops has no equivalent."
        ),
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
      return(call_op("round", x, as.integer(dots[[1]])))
    },
    cospi = ,
    sinpi = ,
    tanpi = return(call_op(name, call_op("multiply", x, pi))),
    # R's cumulative functions run over the elements in R's order
    # (column-major), whatever the shape.
    cumsum = ,
    cumprod = return(call_op(name, column_major(x))),
    cummax = ,
    cummin = return(
      call_op("associative_scan", keras_op(name), column_major(x))
    )
  )
  call_op(name, x)
}

# The elements of a tensor as a vector in R's (column-major) order.
column_major <- function(x) {
  call_op("reshape", call_op("transpose", x), -1L)
}

# A keras.ops function, as a Python callable to pass to another op.
keras_op <- function(name) {
  reticulate::py_get_attr(keras_module()$ops, name)
}

# --- Summary and mean() ------------------------------------------------------

summary_ops <- c(
  sum = "sum",
  prod = "prod",
  max = "max",
  min = "min",
  any = "any",
  all = "all"
)

# na.rm is accepted for compatibility and ignored: tensors have no NA.
tensor_Summary <- function(..., na.rm = FALSE) {
  parts <- lapply(list(...), function(x) {
    if (!inherits(x, c("python.builtin.object", "customgrad_deferred"))) {
      x <- op_convert_to_tensor(x)
    }
    if (.Generic == "range") {
      return(list(call_op("min", x), call_op("max", x)))
    }
    call_op(summary_ops[[.Generic]], x)
  })
  if (.Generic == "range") {
    lows <- lapply(parts, `[[`, 1)
    highs <- lapply(parts, `[[`, 2)
    return(call_op(
      "stack",
      list(
        Reduce(function(a, b) call_op("minimum", a, b), lows),
        Reduce(function(a, b) call_op("maximum", a, b), highs)
      )
    ))
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

# `x %*% y` (R >= 4.4, where %*% dispatches on the matrixOps group).
tensor_matrixOps <- function(x, y) {
  call_op("matmul", as_float(x), as_float(y))
}

# --- Conversion --------------------------------------------------------------

tensor_as_array <- function(x, ...) {
  value <- reticulate::py_to_r(tensor_to_numpy(x))
  if (is.null(dim(value))) {
    dim(value) <- length(value)
  }
  value
}

tensor_as_vector <- function(x, mode = "any") {
  as.vector(reticulate::py_to_r(tensor_to_numpy(x)), mode = mode)
}

tensor_as_double <- function(x, ...) tensor_as_vector(x, "double")
tensor_as_integer <- function(x, ...) tensor_as_vector(x, "integer")
tensor_as_logical <- function(x, ...) tensor_as_vector(x, "logical")

# A NumPy array with the tensor's values; a classed error for a symbolic
# tensor (a tracer inside jax$jit(), a tf.function argument), which has none.
tensor_to_numpy <- function(x, call = rlang::caller_env(2)) {
  tryCatch(
    call_op("convert_to_numpy", x),
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
        parent = cnd
      )
    }
  )
}

tensor_dim <- function(x) {
  shape <- reticulate::py_to_r(py_tuple(reticulate::py_get_attr(x, "shape")))
  if (length(shape) == 0) {
    return(NULL)
  }
  vapply(
    shape,
    function(d) {
      if (is.numeric(d) && length(d) == 1L) as.integer(d) else NA_integer_
    },
    1L
  )
}

tensor_length <- function(x) {
  d <- tensor_dim(x)
  if (is.null(d)) 1L else prod(d)
}

tensor_dtype <- function(x) {
  if (inherits(x, "customgrad_deferred")) {
    x <- force_deferred(x)
  }
  fn <- cached_py("standardize_dtype", function() {
    keras_module()$backend$standardize_dtype
  })
  dtype <- reticulate::py_get_attr(x, "dtype")
  reticulate::py_to_r(reticulate::py_call(fn, dtype))
}

# --- Printing ----------------------------------------------------------------

tensor_format <- function(x, ...) {
  d <- tensor_dim(x)
  shape <- if (is.null(d)) {
    "scalar"
  } else {
    paste0("shape (", paste(ifelse(is.na(d), "?", d), collapse = ", "), ")")
  }
  variable <- inherits(x, "keras.src.backend.common.variables.Variable")
  what <- if (variable) "variable" else "tensor"
  sprintf("<%s %s, %s, %s>", config_backend(), what, shape, tensor_dtype(x))
}

tensor_print <- function(x, ...) {
  cat(tensor_format(x), "\n", sep = "")
  values <- tryCatch(tensor_as_array(x), error = function(cnd) NULL)
  if (is.null(values)) {
    cat("(symbolic: no values while tracing)\n")
  } else {
    if (is.null(tensor_dim(x))) {
      dim(values) <- NULL
    }
    print(values, ...)
  }
  invisible(x)
}

# --- Methods -----------------------------------------------------------------

# Methods that compute new tensors (a recorded node gets these as they are).
tensor_compute_methods <- function() {
  methods <- list(
    Ops = tensor_Ops,
    Math = tensor_Math,
    Summary = tensor_Summary,
    mean = tensor_mean
  )
  if (getRversion() >= "4.4.0") {
    methods$matrixOps <- tensor_matrixOps
  }
  methods
}

# Methods that read a tensor's value (a recorded node is forced first).
tensor_value_methods <- function() {
  list(
    as.array = tensor_as_array,
    as.vector = tensor_as_vector,
    as.double = tensor_as_double,
    as.integer = tensor_as_integer,
    as.logical = tensor_as_logical,
    dim = tensor_dim,
    length = tensor_length,
    format = tensor_format,
    print = tensor_print
  )
}
