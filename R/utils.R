#' Default value for `NULL`
#'
#' `x %||% y` is `y` when `x` is `NULL`, else `x`. Base R has it only from
#' R 4.4; gradient functions use it for the `upstream %||% ..1` fallback.
#'
#' @param x,y Any values.
#' @returns `x` unless it is `NULL`, else `y`.
#' @name null-default
#' @aliases %||%
#' @export
#' @examples
#' NULL %||% 2
#' 1 %||% 2
`%||%` <- function(x, y) if (is.null(x)) y else x
