# keras.ops functions that keras3 lacks and whose R conventions need more
# than argument conversion: 1-based positions in their results. The others
# keras3 lacks are generated (gen-ops-*.R).

#' Unique elements of a tensor
#'
#' @param x A tensor, or an R vector or array.
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
#' @rawNamespace if (!"op_unique" %in% getNamespaceExports("keras3")) export(op_unique)
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
    x,
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
  # A Python tuple, which call_op() hands back as an R list.
  positions <- 1L + cumsum(c(return_index, return_inverse))
  positions <- positions[c(return_index, return_inverse)]
  if (!zero_indexed) {
    for (i in positions) {
      out[[i]] <- call_op("add", out[[i]], 1L)
    }
  }
  out
}
