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
#' @export
#' @examplesIf customgrad::backend_available()
#' op_convert_to_tensor(matrix(1:6, 2))
#' op_convert_to_tensor(c(0.5, 1.5), dtype = "float64")
op_convert_to_tensor <- function(x, dtype = NULL, sparse = NULL, ragged = NULL) {
  if (is.null(dtype) && !inherits(x, "python.builtin.object")) {
    dtype <- r_dtype(x)
  }
  call_op("convert_to_tensor", x, dtype = dtype, sparse = sparse, ragged = ragged)
}

# The Keras dtype for an R vector's type.
r_dtype <- function(x) {
  switch(typeof(x),
    double = reticulate::py_to_r(keras_module()$config$floatx()),
    integer = "int32",
    logical = "bool",
    NULL
  )
}
