# Input checkers, one signature: check_x(x, ..., arg, call).

check_function <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (!is.function(x)) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be a function.",
        "x" = "It is {describe_object(x)}."
      ),
      class = "not_function",
      call = call
    )
  }
  invisible(x)
}

# "a double vector of length 3", "NULL", "a <torch.Tensor> object".
describe_object <- function(x) {
  if (is.null(x)) {
    return("NULL")
  }
  if (inherits(x, "python.builtin.object")) {
    return(paste0("a Python <", class(x)[[1]], "> object"))
  }
  if (is.function(x)) {
    return("a function")
  }
  if (is.atomic(x) || is.list(x)) {
    type <- if (is.list(x)) "list" else paste(typeof(x), "vector")
    return(paste0("a ", type, " of length ", length(x)))
  }
  paste0("a <", class(x)[[1]], "> object")
}
