# Input checkers, all of customgrad's, with one signature:
# check_x(x, ..., arg = caller_arg(x), call = caller_env()). They return
# `x` invisibly or signal a classed customgrad error.

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
  if (is.data.frame(x)) {
    return(paste0(
      "a data frame of ",
      ncol(x),
      " column",
      if (ncol(x) != 1) "s"
    ))
  }
  if (is.factor(x)) {
    return(paste0("a factor of length ", length(x)))
  }
  if (is.atomic(x) || is.list(x)) {
    type <- if (is.list(x)) "list" else paste(typeof(x), "vector")
    article <- if (grepl("^[aeiou]", type)) "an " else "a "
    return(paste0(article, type, " of length ", length(x)))
  }
  paste0("a <", class(x)[[1]], "> object")
}

check_backend <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  # rlang's message (with its "Did you mean"), customgrad's classes.
  tryCatch(
    rlang::arg_match0(x, backend_names, arg_nm = arg, error_call = call),
    error = function(cnd) {
      class(cnd) <- c(
        "customgrad_error_backend_unknown",
        "customgrad_error",
        class(cnd)
      )
      stop(cnd)
    }
  )
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

check_tolerance <- function(
  x,
  zero = FALSE,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.numeric(x) &&
    length(x) == 1 &&
    !is.na(x) &&
    is.finite(x) &&
    (x > 0 || (zero && x == 0))
  if (!ok) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be a {if (zero) 'non-negative' else 'positive'} number.",
        "x" = "It is {describe_object(x)}{if (is.numeric(x) && length(x) == 1) paste0(': ', x) else ''}."
      ),
      class = "bad_argument",
      call = call
    )
  }
  invisible(x)
}

# A finite number (an R double or integer of length 1), returned as a
# double; `min`: the number must be greater than it; `hint`: an `i` bullet.
check_number <- function(
  x,
  min = -Inf,
  ...,
  hint = NULL,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.numeric(x) && length(x) == 1 && is.finite(x) && x > min
  if (!ok) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be a finite number{if (is.finite(min)) paste0(' greater than ', min) else ''}.",
        "x" = "It is {describe_object(x)}{if (is.numeric(x) && length(x) == 1) paste0(': ', x) else ''}.",
        "i" = hint
      ),
      class = "bad_argument",
      call = call
    )
  }
  as.double(x)
}

# An argument without a default that the caller left out (R would say so
# only where it is first used, inside customgrad).
check_required <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (missing(x)) {
    abort_customgrad(
      "{.arg {arg}} is missing, with no default.",
      class = "bad_argument",
      call = call
    )
  }
  invisible()
}

# A whole number, `from` or more (a count, or an id from 0).
check_count <- function(
  x,
  from = 1L,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.numeric(x) &&
    length(x) == 1 &&
    !is.na(x) &&
    x == round(x) &&
    x >= from
  if (!ok) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be a whole number, {from} or more.",
        "x" = "It is {describe_object(x)}{if (is.numeric(x) && length(x) == 1) paste0(': ', x) else ''}."
      ),
      class = "bad_argument",
      call = call
    )
  }
}

check_bool <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (!isTRUE(x) && !isFALSE(x)) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be `TRUE` or `FALSE`.",
        "x" = "It is {describe_object(x)}."
      ),
      class = "bad_argument",
      call = call
    )
  }
  invisible(x)
}

check_wrt <- function(
  x,
  f,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.numeric(x) &&
    !inherits(x, "python.builtin.object") &&
    length(x) > 0 &&
    !anyNA(x) &&
    all(x >= 1) &&
    all(x == trunc(x)) &&
    !anyDuplicated(x)
  if (!ok) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be argument positions: distinct whole numbers from 1.",
        "x" = if (is.numeric(x)) {
          "It is {.val {x}}."
        } else {
          "It is {describe_object(x)}."
        }
      ),
      class = "wrt",
      call = call
    )
  }
  fmls <- names(transform_formals(f))
  if (!"..." %in% fmls && max(x) > length(fmls)) {
    abort_customgrad(
      c(
        "{.arg {arg}} must refer to arguments of {.arg f}.",
        "x" = "{.arg f} has {length(fmls)} argument{?s}, and {.arg {arg}} includes {max(x)}."
      ),
      class = "wrt",
      call = call
    )
  }
  as.integer(x)
}

# Tensors, R numbers and arrays, or nested lists of them.
check_tensor_tree <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (is.null(x) || is_tensor_tree(x)) {
    return(invisible(x))
  }
  abort_customgrad(
    c(
      "{.arg {arg}} must be a tensor, an R number or array, or a list of them.",
      "x" = "It is {describe_object(x)}."
    ),
    class = "input",
    call = call
  )
}

check_scalar_value <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (has_one_element(x)) {
    return(invisible(x))
  }
  abort_customgrad(
    c(
      "{.arg f} must return a scalar when {.arg upstream} is {.code NULL}.",
      "x" = "It returned {describe_value(x)}.",
      "i" = "Reduce the value to one number (with {.fn sum}, say), or give {.arg upstream} for a vector-Jacobian product."
    ),
    class = "not_scalar",
    call = call
  )
}

check_custom_gradient_result <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (
    is.list(x) &&
      length(x) == 2L &&
      is.function(x[[2L]]) &&
      !inherits(x, "python.builtin.object")
  ) {
    if (!holds_value(x[[1L]])) {
      abort_customgrad(
        c(
          "The value {.arg f} returns must hold a tensor.",
          "x" = "It is {describe_object(x[[1L]])}.",
          "i" = "Compute the value from {.arg f}'s inputs with tensor operations; check what {.arg f} was called with."
        ),
        class = "f_result",
        call = call
      )
    }
    return(invisible(x))
  }
  if (
    !is.list(x) ||
      inherits(x, "python.builtin.object") ||
      length(x) != 2
  ) {
    abort_customgrad(
      c(
        "{.arg f} must return {.code tuple(value, grad)}.",
        "x" = "It returned {describe_object(x)}.",
        "i" = "Return the value together with its gradient function, such as {.code tuple(y, function(upstream) upstream * dy_dx)}."
      ),
      class = "f_result",
      call = call
    )
  }
  if (!is.function(x[[2]])) {
    abort_customgrad(
      c(
        "The second element of {.arg f}'s result must be the gradient function.",
        "x" = "It is {describe_object(x[[2]])}."
      ),
      class = "grad_not_function",
      call = call
    )
  }
  invisible(x)
}

# Whether f's value holds something to differentiate: a tensor, or R
# numbers, possibly in (nested) lists; not NULL, strings or nothing.
holds_value <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(TRUE)
  }
  if (is.list(x)) {
    return(length(x) > 0L && all(vapply(x, holds_value, TRUE)))
  }
  is.numeric(x) && length(x) > 0L
}

# R values reach tensors without NA: a tensor has no NA, and reticulate
# would make a logical NA `True`. NaN is a floating-point value and passes.
check_no_na <- function(
  x,
  ...,
  what = "Argument {.arg {arg}}",
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (is.atomic(x) && anyNA(x) && !(is.double(x) && all(is.nan(x[is.na(x)])))) {
    abort_customgrad(
      c(
        paste(what, "holds {.code NA}, which a tensor can't hold."),
        "i" = "Remove or impute missing values first; {.code NaN} passes as a floating-point value."
      ),
      class = "na",
      call = call
    )
  }
  invisible(x)
}

# A backend that gives `variables` (TensorFlow) gives them only to a
# gradient function that runs at backward time: a traced grad can't return
# variable gradients. The adapter says whether it does.
check_traceable_grad <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (x$variables && customgrad_py()$grad_gets_variables()) {
    abort_customgrad(
      "Its gradient function takes {.arg variables}, which TensorFlow gives only to a gradient function that R runs.",
      class = "trace_read",
      call = call
    )
  }
}

# The converted elements of a list argument (as_input()): all values, or
# all options.
check_no_mixed_options <- function(
  x,
  ...,
  what = "Argument {.arg {arg}}",
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  options <- vapply(x, inherits, TRUE, "customgrad_static")
  if (any(options) && !all(options)) {
    abort_customgrad(
      c(
        paste(what, "mixes values to differentiate with options."),
        "x" = "{cli::qty(sum(!options))}Element{?s} {which(!options)} {?is/are} numeric; {cli::qty(sum(options))}element{?s} {which(options)} {?is/are} not.",
        "i" = "Pass the numbers and the options as separate arguments."
      ),
      class = "input",
      call = call
    )
  }
  invisible(x)
}
