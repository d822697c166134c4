# keras.ops functions whose R conventions need more than argument
# conversion: R-like sequences and 1-based positions in their results. The
# rest of keras.ops is generated (gen-ops-*.R).

#' Evenly spaced values, like `seq()`
#'
#' As in the keras3 R package, `op_arange()` follows R's `seq()` rather than
#' Python's `range()`: `op_arange(end)` counts from 1, and the interval
#' includes `end` unless `include_end = FALSE`. R integers give an integer
#' tensor and R doubles a tensor of Keras' float type, unless `dtype` says
#' otherwise.
#'
#' @param start The first value; with `end` missing, the last value (and
#'   the sequence starts at 1).
#' @param end The last value (included when the steps reach it).
#' @param step The spacing between values.
#' @param dtype A dtype name, or `NULL` to infer it from the arguments.
#' @param include_end If `FALSE`, `end` is left out as in Python's
#'   `keras.ops.arange()`.
#' @returns A one-dimensional tensor.
#' @family numpy ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_arange(5L)
#' op_arange(0, 1, 0.25)
#' op_arange(1, 5, include_end = FALSE)
op_arange <- function(start, end, step = 1L, dtype = NULL, include_end = TRUE) {
  if (missing(end)) {
    end <- start
    start <- if (is.double(end)) 1 else 1L
  }
  if (is_int_dtype(dtype)) {
    if (is.double(start)) {
      start <- as.integer(start)
    }
    if (is.double(end)) {
      end <- as.integer(end)
    }
    if (is.double(step)) step <- as.integer(step)
  }
  if (include_end) {
    # Half a step past the end: the end is in, rounding can't add one more.
    whole <- is.integer(end) && is.integer(step)
    end <- if (whole) end + step else end + step / 2
  }
  call_op("arange", start, end, step, dtype)
}

#' Positions of the non-zero elements
#'
#' Unlike Python's `keras.ops.nonzero()`, which returns one index vector per
#' axis, `op_nonzero()` returns them as the columns of one matrix, with
#' 1-based positions (as the keras3 R package does), so that row `i` is the
#' position of the `i`-th non-zero element, counting in row-major order (the
#' last axis varies fastest, unlike `which(arr.ind = TRUE)`).
#'
#' @param x A tensor (R double vectors and arrays become tensors of Keras'
#'   float type).
#' @returns An integer tensor with one row per non-zero element and one
#'   column per axis of `x`.
#' @family numpy ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_nonzero(c(0, 1, 0, 2))
#' op_nonzero(rbind(c(0, 1), c(2, 0)))
op_nonzero <- function(x) {
  idx <- call_op("nonzero", as_float(x))
  call_op("add", call_op("stack", idx, -1L), 1L)
}

#' Unique elements of a tensor
#'
#' @param x A tensor (R double vectors and arrays become tensors of Keras'
#'   float type).
#' @param sorted Whether to sort the unique elements in ascending order.
#' @param return_index If `TRUE`, also return the position of the first
#'   occurrence of each unique element in `x`.
#' @param return_inverse If `TRUE`, also return, for each element of `x`, the
#'   position of its value among the unique elements.
#' @param return_counts If `TRUE`, also return how often each unique element
#'   occurs in `x`.
#' @param axis The axis to operate on (1-based), or `NULL` to flatten `x`
#'   first.
#' @param size If not `NULL`, the result has this fixed length: padded with
#'   `fill_value` or truncated (needed inside `jax$jit()`).
#' @param fill_value The padding value when `size` is given.
#' @param zero_indexed If `TRUE`, returned positions are 0-based as in
#'   Python; by default they are 1-based as in R.
#' @returns A tensor of unique values; with any `return_*` argument `TRUE`,
#'   an R list of the values followed by the positions, inverse positions
#'   and counts that were asked for.
#' @family numpy ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_unique(c(3, 1, 3, 2))
#' op_unique(c(3, 1, 3, 2), return_index = TRUE, return_counts = TRUE)
op_unique <- function(
  x,
  sorted = TRUE,
  return_index = FALSE,
  return_inverse = FALSE,
  return_counts = FALSE,
  axis = NULL,
  size = NULL,
  fill_value = NULL,
  zero_indexed = FALSE
) {
  out <- call_op(
    "unique",
    as_float(x),
    sorted,
    return_index,
    return_inverse,
    return_counts,
    as_axis(axis),
    as_int(size),
    fill_value
  )
  if (!(return_index || return_inverse || return_counts)) {
    return(out)
  }
  out <- py_result(out)
  positions <- 1L + cumsum(c(return_index, return_inverse))
  positions <- positions[c(return_index, return_inverse)]
  if (!zero_indexed) {
    for (i in positions) {
      out[[i]] <- call_op("add", out[[i]], 1L)
    }
  }
  out
}

#' Coordinates of flat positions
#'
#' Converts positions in a flattened tensor of shape `shape` to coordinates,
#' in row-major (C) order as in Keras (this is how `op_reshape()` and
#' `op_ravel()` order elements). Positions and coordinates are 1-based.
#'
#' @param indices Flat positions: a tensor, or R integers.
#' @param shape The shape of the tensor, an R integer vector.
#' @param zero_indexed If `TRUE`, positions and coordinates are 0-based as in
#'   Python.
#' @returns An R list with one tensor of coordinates per axis.
#' @family numpy ops
#' @export
#' @examplesIf customgrad::backend_available()
#' op_unravel_index(c(2, 6), c(2, 3))
op_unravel_index <- function(indices, shape, zero_indexed = FALSE) {
  out <- py_result(call_op(
    "unravel_index",
    as_index(indices, zero_indexed),
    as_shape(shape)
  ))
  if (!zero_indexed) {
    out <- lapply(out, function(i) call_op("add", i, 1L))
  }
  out
}
