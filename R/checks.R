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

check_backend <- function(
  backend,
  ...,
  arg = rlang::caller_arg(backend),
  call = rlang::caller_env()
) {
  if (
    !is.character(backend) ||
      length(backend) != 1 ||
      !backend %in% backend_names
  ) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be one of {.or {.val {backend_names}}}.",
        "x" = "It is {describe_object(backend)}{if (is.character(backend)) paste0(': ', encodeString(backend[1], quote = '\"')) else ''}."
      ),
      class = "backend_unknown",
      call = call
    )
  }
  backend
}

check_trace <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (isTRUE(x) || isFALSE(x) || identical(x, "strict")) {
    return(x)
  }
  abort_customgrad(
    c(
      "{.arg {arg}} must be {.code TRUE}, {.code FALSE} or {.val strict}.",
      "x" = "It is {describe_object(x)}."
    ),
    class = "trace_arg",
    call = call
  )
}
