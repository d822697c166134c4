#' Convert R values to a backend tensor
#'
#' R doubles become Keras' float type (`"float32"` by default) unless
#' `dtype` says otherwise; R integers stay integers (`"int32"`) and logicals
#' become `"bool"`. Shapes and element order are kept: an R matrix becomes a
#' tensor of the same shape whose `[i, j]` elements match.
#'
#' @param x An R number, vector, matrix or array, or a tensor.
#' @param dtype A dtype name such as `"float32"` or `"int64"`, or `NULL`.
#' @param sparse,ragged Passed to Keras; `NULL` for its default.
#' @returns A tensor of the active backend.
#' @family core ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_convert_to_tensor(matrix(1:6, 2))
#' op_convert_to_tensor(c(0.5, 1.5), dtype = "float64")
op_convert_to_tensor <- function(
  x,
  dtype = NULL,
  sparse = NULL,
  ragged = NULL
) {
  if (is.atomic(x) && !is.null(x)) {
    if (is.null(dtype)) {
      dtype <- r_dtype(x)
    } else if (is.double(x) && is_int_dtype(dtype)) {
      storage.mode(x) <- "integer"
    }
    x <- as_array(x)
  }
  call_op(
    "convert_to_tensor",
    x,
    dtype = dtype,
    sparse = sparse,
    ragged = ragged
  )
}

is_int_dtype <- function(dtype) {
  is.character(dtype) && grepl("int", dtype, fixed = TRUE)
}

#' Convert a tensor to an R array
#'
#' `op_convert_to_array()` is `as.array()` for tensors: the values as an R
#' array (a 0-d tensor gives a length-one array) with the tensor's shape and
#' element order. [op_convert_to_numpy()] returns a NumPy array instead.
#'
#' @param x A tensor, or an R value.
#' @returns An R array.
#' @family core ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_convert_to_array(op_convert_to_tensor(matrix(1:6, 2)))
op_convert_to_array <- function(x) {
  if (!inherits(x, "python.builtin.object")) {
    return(as.array(x))
  }
  tensor_as_array(x)
}

#' Shape of a tensor
#'
#' @param x A tensor.
#' @returns An R list with one integer per axis; an unknown dimension (while
#'   tracing) is `NULL` or a scalar tensor.
#' @family core ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_shape(op_zeros(c(2, 3)))
op_shape <- function(x) {
  shape <- call_op("shape", x)
  if (!identical(class(shape)[[1]], "python.builtin.tuple")) {
    shape <- py_tuple(shape) # a TensorShape or torch.Size
  }
  reticulate::py_to_r(shape)
}

# --- keras.ops.image ---------------------------------------------------------

image_ops_cache <- new.env(parent = emptyenv())

cache_image_op <- function(name) {
  customgrad_py() # sets up the$memory
  image <- reticulate::py_get_attr(keras_module()$ops, "image")
  fn <- the$memory$wrap(reticulate::py_get_attr(image, name))
  assign(name, fn, envir = image_ops_cache)
  fn
}

# Call keras.ops.image.<name>(...) through a cached callable, like call_op()
# (results counted as handed to R, see customgrad-package.R).
call_image_op <- function(name, ...) {
  reticulate::py_call(image_ops_cache[[name]] %||% cache_image_op(name), ...)
}

# Keras' float type; asked each time, as keras.config.set_floatx() may
# change it.
floatx <- function() {
  fn <- cached_py("floatx", function() keras_module()$config$floatx)
  reticulate::py_to_r(reticulate::py_call(fn))
}

# --- Argument conversion for the op_*() wrappers ------------------------------
# Each helper returns tensors and other Python objects unchanged, so the
# cost for tensor arguments is one R type check.

# The Keras dtype for an R vector's type.
r_dtype <- function(x) {
  switch(
    typeof(x),
    double = floatx(),
    integer = "int32",
    logical = "bool",
    NULL
  )
}

# A tensor argument. reticulate turns R vectors into Python lists, which
# several backends reject, so vectors go as one-dimensional arrays; R
# doubles become tensors of Keras' float type. A lone R number stays a Python
# number (Keras treats those as weakly typed). Anything else, tensors
# included, goes to Python as it is.
as_float <- function(x) {
  if (!is.atomic(x) || is.null(x) || (length(x) == 1L && is.null(dim(x)))) {
    return(x)
  }
  if (is.double(x)) {
    return(op_convert_to_tensor(x))
  }
  as_array(x)
}

# A list of tensor arguments.
as_floats <- function(x) {
  if (is.list(x) && !inherits(x, "python.builtin.object")) {
    lapply(x, as_float)
  } else {
    as_float(x)
  }
}

# A list of tensor arguments that Python wants as a tuple.
as_tuple <- function(x) {
  if (!is.list(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  do.call(reticulate::tuple, unname(lapply(x, as_float)))
}

# An R vector as a one-dimensional array (NumPy array in Python).
as_array <- function(x) {
  if (!is.null(x) && is.null(dim(x)) && length(x) != 1L) {
    dim(x) <- length(x)
  }
  x
}

# Axes: R's 1-based axis k is Python's k - 1; negative axes count from the
# end in both; several axes become a Python list.
as_axis <- function(axis, arg = "axis", call = rlang::caller_env()) {
  if (is.list(axis) && !inherits(axis, "python.builtin.object")) {
    axis <- unlist(axis)
  }
  if (!is.numeric(axis)) {
    return(axis)
  }
  if (anyNA(axis) || any(axis == 0)) {
    abort_customgrad(
      c(
        "{.arg {arg}} can't be 0 or NA: axes are 1-based.",
        "i" = "Use {.code 1} for the first axis and {.code -1} for the last."
      ),
      class = "axis_zero",
      call = call
    )
  }
  axis <- as.integer(axis)
  positive <- axis > 0L
  axis[positive] <- axis[positive] - 1L
  if (length(axis) == 1L) axis else as.list(axis)
}

# Several axes that Python wants as a tuple.
as_axis_tuple <- function(axes, arg = "axes", call = rlang::caller_env()) {
  axes <- as_axis(axes, arg = arg, call = call)
  if (is.list(axes)) do.call(reticulate::tuple, axes) else axes
}

# Axes that Python wants as a list even when there is one.
as_axes <- function(axes, arg = "axes", call = rlang::caller_env()) {
  axes <- as_axis(axes, arg = arg, call = call)
  if (is.numeric(axes)) list(axes) else axes
}

# Integers: R numbers become Python ints; several become a Python list.
as_int <- function(x) {
  if (!is.numeric(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  if (length(x) == 1L && is.null(dim(x))) {
    return(as.integer(x))
  }
  as.list(as.integer(x))
}

# An integer tensor argument: R numbers become integer arrays (dims kept).
as_int_array <- function(x) {
  if (!is.atomic(x) || is.null(x)) {
    return(x)
  }
  if (is.factor(x)) {
    x <- as.integer(x)
  }
  if (is.double(x)) {
    storage.mode(x) <- "integer"
  }
  as_array(x)
}

# A shape: a Python tuple of ints, with NA (or NULL in a list) as None.
as_shape <- function(x) {
  if (is.null(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  dims <- lapply(as.list(x), function(d) {
    if (is.null(d) || is.na(d)) NULL else as.integer(d)
  })
  do.call(reticulate::tuple, dims)
}

# A new shape for reshape(): NA or NULL is the one inferred dimension (-1).
as_newshape <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(x)
  }
  dims <- lapply(as.list(x), function(d) {
    if (is.null(d) || is.na(d)) -1L else as.integer(d)
  })
  do.call(reticulate::tuple, dims)
}

# Pad widths: a number, a (before, after) pair, or a matrix with one
# (before, after) row per axis.
as_pad_width <- function(x) {
  if (!is.numeric(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  if (is.matrix(x)) {
    return(lapply(seq_len(nrow(x)), function(i) as.list(as.integer(x[i, ]))))
  }
  as_int(x)
}

# 1-based positions become Python's 0-based ones (dims kept). With
# `zero_based = TRUE` they are taken as 0-based already.
as_index <- function(x, zero_based = FALSE) {
  if (is.null(x)) {
    return(x)
  }
  if (inherits(x, "python.builtin.object")) {
    return(if (zero_based) x else call_op("subtract", x, 1L))
  }
  if (is.list(x)) {
    return(lapply(x, as_index, zero_based = zero_based))
  }
  x <- as_int_array(x)
  if (zero_based) x else x - 1L
}

# `data_format` of image ops. Keras' eager image ops hand `None` to the JAX
# and PyTorch backends unresolved, which then treat channels-last images as
# channels-first; resolving it here gives every backend the configured one.
as_data_format <- function(x) {
  if (!is.null(x)) {
    return(x)
  }
  fn <- cached_py("image_data_format", function() {
    keras_module()$config$image_data_format
  })
  reticulate::py_to_r(reticulate::py_call(fn))
}

# Start positions of slice(): one 1-based position per axis, as a list.
as_start_indices <- function(x) {
  if (!is.numeric(x) || inherits(x, "python.builtin.object")) {
    return(as_index(x))
  }
  as.list(as.integer(x) - 1L)
}

# `indices_or_sections` of split(): a number of sections, or 1-based
# positions where the pieces start.
as_sections <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(if (length(tensor_dim(x)) > 0L) as_index(x) else x)
  }
  if (length(x) == 1L && is.null(dim(x))) {
    return(as.integer(x))
  }
  as.list(as_index(as.vector(x)))
}

# tensordot's axes: a number of axes, or a list of two axis vectors.
as_tensordot_axes <- function(axes) {
  if (is.list(axes) && !inherits(axes, "python.builtin.object")) {
    return(lapply(axes, function(a) as_axes(a, arg = "axes")))
  }
  as_int(axes)
}

# R functions passed as callbacks; arguments reach them converted to R
# (Python numbers and lists), tensors stay tensors.
# On TensorFlow, autograph would try to convert them (pointless: there is no
# Python source to convert) and leave generated files in the temp directory.
as_py_function <- function(f) {
  if (!is.function(f)) {
    return(f)
  }
  fn <- reticulate::r_to_py(outside_session(f), convert = TRUE)
  if (identical(config_backend(), "tensorflow")) {
    do_not_convert <- cached_py("do_not_convert", function() {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      tf$autograph$experimental$do_not_convert
    })
    fn <- reticulate::py_call(do_not_convert, fn)
  }
  fn
}

as_py_functions <- function(fs) {
  if (is.list(fs) && !inherits(fs, "python.builtin.object")) {
    lapply(fs, as_py_function)
  } else {
    as_py_function(fs)
  }
}

# --- Results ------------------------------------------------------------------

py_builtin_classes <- c(
  "python.builtin.list",
  "python.builtin.tuple",
  "python.builtin.dict",
  "python.builtin.int",
  "python.builtin.float",
  "python.builtin.bool",
  "python.builtin.str",
  "python.builtin.NoneType"
)

# Python containers and scalars become R values (the tensors inside stay
# tensors); a tensor is returned as it is. Named tuples (JAX's and torch's
# linear algebra results) become plain lists, as on TensorFlow.
py_result <- function(x) {
  if (!inherits(x, py_builtin_classes)) {
    return(x)
  }
  if (
    inherits(x, "python.builtin.tuple") &&
      class(x)[[1]] != "python.builtin.tuple"
  ) {
    x <- py_tuple(x)
  }
  reticulate::py_to_r(x)
}

py_tuple <- function(x) {
  fn <- cached_py("tuple", function() {
    reticulate::import_builtins(convert = FALSE)$tuple
  })
  reticulate::py_call(fn, x)
}

# Python callables looked up once (builtins.tuple, keras.config.floatx, ...).
py_cache <- new.env(parent = emptyenv())

cached_py <- function(name, lookup) {
  fn <- py_cache[[name]]
  if (is.null(fn)) {
    fn <- lookup()
    assign(name, fn, envir = py_cache)
  }
  fn
}

# A Python function as an R function.
py_function_result <- function(x) {
  reticulate::py_to_r(x)
}

# 0-based positions returned by Python become 1-based.
index_result <- function(x, zero_based = FALSE) {
  if (zero_based) x else call_op("add", x, 1L)
}

# As index_result(), for element `i` of a result that is a tuple.
index_result_at <- function(x, i, zero_based = FALSE) {
  x <- py_result(x)
  if (!zero_based) {
    x[[i]] <- call_op("add", x[[i]], 1L)
  }
  x
}
