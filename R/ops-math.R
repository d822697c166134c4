#' Elementwise math on tensors
#'
#' `op_exp(x)` is \eqn{e^x}, `op_log(x)` the natural logarithm,
#' `op_add(x1, x2)` and `op_multiply(x1, x2)` the sum and product with
#' broadcasting. Arguments may be tensors or R numbers.
#'
#' @param x,x1,x2 Tensors or R numbers.
#' @returns A tensor of the active backend.
#' @name op-math
#' @examplesIf customgrad::backend_available()
#' op_exp(0)
#' op_log(op_exp(2))
#' op_add(1, op_multiply(2, 3))
NULL

#' @rdname op-math
#' @export
op_exp <- function(x) call_op("exp", x)

#' @rdname op-math
#' @export
op_log <- function(x) call_op("log", x)

#' @rdname op-math
#' @export
op_add <- function(x1, x2) call_op("add", x1, x2)

#' @rdname op-math
#' @export
op_multiply <- function(x1, x2) call_op("multiply", x1, x2)
