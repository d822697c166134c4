# What customgrad's op_*() wrappers (gen-ops-*.R, ops-numpy.R) share: the
# call of keras.ops.image, argument conversion and results. They follow
# keras3's conventions: tensor arguments go to Python as reticulate
# converts them, axes and positions are 1-based, R numbers become Python
# ints where Python wants ints.

# --- keras.ops.image ---------------------------------------------------------

# Call keras.ops.image.<name>(...) as keras3 does, through keras3's `keras`
# module: arguments converted by reticulate, the result handed back with
# conversion on (as call_op() does for keras.ops).
call_image_op <- function(name, ...) {
  fn <- reticulate::py_get_attr(keras3::keras$ops$image, name)
  fn(...)
}

# --- Argument conversion for the op_*() wrappers ------------------------------
# Each helper returns tensors and other Python objects unchanged, so the
# cost for tensor arguments is one R type check.

# An R vector as a one-dimensional array (NumPy array in Python).
as_array <- function(x) {
  if (!is.null(x) && is.null(dim(x)) && length(x) != 1L) {
    dim(x) <- length(x)
  }
  x
}

# Axes: R's 1-based axis k is Python's k - 1; negative axes count from the
# end in both; several axes become a Python tuple (JAX's nan*() reductions
# take axes as a static argument, which must be hashable: no list).
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
  if (length(axis) == 1L) axis else do.call(reticulate::tuple, as.list(axis))
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

# `indices_or_sections` of the split ops: a number of sections, or 1-based
# positions where the pieces start.
as_sections <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(if (op_ndim(x) > 0L) as_index(x) else x)
  }
  if (length(x) == 1L && is.null(dim(x))) {
    return(as.integer(x))
  }
  as.list(as_index(as.vector(x)))
}

# A list of tensor arguments for an op that takes backend tensors only (on
# some backend): each element through keras3's op_convert_to_tensor(), which
# keeps R's types.
as_tensors <- function(x) {
  if (!is.list(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  lapply(x, op_convert_to_tensor)
}

# A list of tensor arguments that Python wants as a tuple (the elements go
# as reticulate converts them).
as_tuple <- function(x) {
  if (!is.list(x) || inherits(x, "python.builtin.object")) {
    return(x)
  }
  do.call(reticulate::tuple, unname(x))
}

# `data_format` of image ops. Keras' eager image ops have handed `None` to
# the JAX and PyTorch backends unresolved, which then treat channels-last
# images as channels-first (Keras 3.15 resolves it for the ops that use this);
# resolving it here gives every backend the configured one.
as_data_format <- function(x) {
  if (is.null(x)) config_image_data_format() else x
}

# --- Results ------------------------------------------------------------------

# 0-based positions returned by Python become 1-based.
index_result <- function(x, zero_based = FALSE) {
  if (zero_based) x else call_op("add", x, 1L)
}
