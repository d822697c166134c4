# Printing, str() and summary() for JAX and PyTorch tensors (the methods
# tensor-ops.R registers): the shape and dtype, then the values, or for a
# large tensor its corners, as the tensorflow R package prints TensorFlow's.

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

# The values as R prints an array, in at most 20 lines under the one-line
# header. A tensor of at most `customgrad.print_max` elements whose values
# fit prints in full; a larger one shows its corners, as tensorflow R does:
# the first and last rows and columns of its first and last matrices, with
# `...` for the rest. Only the corners are copied to R.
tensor_print <- function(
  x,
  ...,
  max = getOption("customgrad.print_max", 200L)
) {
  cat(tensor_format(x), "\n", sep = "")
  shape <- tensor_shape(x)
  lines <- if (!anyNA(shape)) {
    tryCatch(
      tensor_value_lines(x, shape, max, budget = 19L),
      error = function(cnd) NULL
    )
  }
  if (is.null(lines)) {
    cat("(symbolic: no values while tracing)\n")
  } else {
    cat(lines, sep = "\n")
  }
  invisible(x)
}

# The lines that show `x`'s values: all of them when they fit in `budget`
# lines, else its corners.
tensor_value_lines <- function(x, shape, max, budget) {
  if (prod(shape) <= max || length(shape) == 0L) {
    lines <- utils::capture.output(print(tensor_values(x)))
    # (the blank lines around the matrices of an array go)
    lines <- lines[nzchar(lines)]
    if (length(lines) <= budget) {
      return(lines)
    }
  }
  # Fewer elements per row until the lines fit the console's width.
  edges <- if (length(shape) == 1L) 5:1 else 3:1
  for (edge in edges) {
    lines <- if (length(shape) == 1L) {
      vector_corner_lines(x, shape, edge)
    } else {
      array_corner_lines(x, shape, edge)
    }
    if (all(nchar(lines) <= getOption("width"))) {
      break
    }
  }
  lines
}

# 0-based indices of the first and last `edge` positions of an axis of
# length `n` (all of them when at most one would be left out).
corner_indices <- function(n, edge) {
  if (n <= 2L * edge + 1L) {
    return(seq_len(n) - 1L)
  }
  c(seq_len(edge) - 1L, seq.int(n - edge, n - 1L))
}

# `x` at the given 0-based indices along each axis, as an R array with the
# same number of dimensions.
gather_corners <- function(x, indices) {
  for (axis in seq_along(indices)) {
    x <- call_op("take", x, array(indices[[axis]]), axis = axis - 1L)
  }
  values <- keras3::op_convert_to_array(x)
  dim(values) <- lengths(indices)
  values
}

# A long vector: its first and last elements, with their positions.
vector_corner_lines <- function(x, shape, edge) {
  n <- shape[[1]]
  index <- corner_indices(n, edge)
  text <- format(as.vector(gather_corners(x, list(index))))
  if (length(index) == n) {
    return(paste("[1]", paste(text, collapse = " ")))
  }
  first <- seq_len(edge)
  paste(
    "[1]",
    paste(text[first], collapse = " "),
    "...",
    sprintf("[%d]", n - edge + 1L),
    paste(text[-first], collapse = " ")
  )
}

# An array of two or more dimensions: the corners of its matrices along
# the first two axes (`columns` first and last columns), for the first
# and the last matrix along the other axes, as R names them (", , 1").
array_corner_lines <- function(x, shape, columns) {
  rank <- length(shape)
  rows <- if (rank == 2L) 5L else 2L
  row_index <- corner_indices(shape[[1]], rows)
  col_index <- corner_indices(shape[[2]], columns)
  if (rank == 2L) {
    values <- gather_corners(x, list(row_index, col_index))
    return(matrix_corner_lines(values, row_index, col_index))
  }
  outer <- shape[-(1:2)]
  ends <- unique(list(rep(0L, rank - 2L), outer - 1L))
  blocks <- lapply(ends, function(at) {
    values <- gather_corners(x, c(list(row_index, col_index), as.list(at)))
    dim(values) <- dim(values)[1:2]
    c(
      paste0(", , ", paste(at + 1L, collapse = ", ")),
      matrix_corner_lines(values, row_index, col_index)
    )
  })
  if (length(blocks) == 1L) {
    return(blocks[[1]])
  }
  skipped <- prod(outer) - 2L
  between <- if (skipped > 0) {
    sprintf(
      ", , ... (%s more %s)",
      format(skipped, big.mark = ","),
      if (skipped == 1) "matrix" else "matrices"
    )
  }
  c(blocks[[1]], between, blocks[[2]])
}

# A matrix of corner values, labelled with the positions it holds in the
# whole tensor, with a `...` row and column where some are left out.
matrix_corner_lines <- function(values, row_index, col_index) {
  text <- format(values)
  dim(text) <- dim(values)
  row_names <- sprintf("[%d,]", row_index + 1L)
  col_names <- sprintf("[,%d]", col_index + 1L)
  gap <- function(index) which(diff(index) > 1L)
  row_gap <- gap(row_index)
  col_gap <- gap(col_index)
  if (length(col_gap) > 0) {
    left <- seq_len(col_gap)
    text <- cbind(
      text[, left, drop = FALSE],
      "...",
      text[, -left, drop = FALSE]
    )
    col_names <- c(col_names[left], "", col_names[-left])
  }
  if (length(row_gap) > 0) {
    top <- seq_len(row_gap)
    text <- rbind(text[top, , drop = FALSE], "...", text[-top, , drop = FALSE])
    row_names <- c(row_names[top], "", row_names[-top])
  }
  dimnames(text) <- list(row_names, col_names)
  utils::capture.output(print(text, quote = FALSE, right = TRUE))
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
