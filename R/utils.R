#' Objects exported from other packages
#'
#' `x %||% y` is `y` when `x` is `NULL`, else `x`: rlang's, re-exported
#' because gradient functions use it for the `upstream %||% ..1` fallback
#' and base R has it only from R 4.4.
#'
#' @importFrom rlang %||%
#' @export %||%
#' @name reexports
#' @keywords internal
#' @aliases %||%
NULL
