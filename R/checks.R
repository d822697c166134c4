# Input checkers, all of customgrad's, with one signature:
# check_x(x, ..., arg = caller_arg(x), call = caller_env()). They return
# `x` invisibly or signal a classed customgrad error. rlang checks what it
# exports (arg_match0(), check_required()), re-classed as customgrad's;
# rlang 1.0.6 (Debian's) exports no type checkers (check_number_whole() and
# friends are standalone files to vendor), so the few below are ours, with
# cli's {.obj_type_friendly} words.

# "a float32 tensor of shape (2, 3)" for a tensor of any backend (Keras'
# symbolic ones too); cli's words ("an integer vector", "NULL") otherwise.
describe_object <- function(x) {
  if (reticulate::is_py_object(x)) {
    tensor <- tryCatch(
      sprintf(
        "a %s tensor of shape (%s)",
        tensor_dtype(x),
        paste(ifelse(is.na(d <- tensor_shape(x)), "?", d), collapse = ", ")
      ),
      error = function(cnd) NULL
    )
    if (!is.null(tensor)) {
      return(tensor)
    }
  }
  what <- cli::format_inline("{.obj_type_friendly {x}}")
  is_list <- is.list(x) && !is.data.frame(x) && length(x) > 0L
  if (is_list || is.atomic(x) && length(x) > 1L) {
    what <- paste(what, "of length", length(x))
  } else if ((is.numeric(x) || is.character(x)) && length(x) == 1L) {
    what <- paste0(
      what,
      " (",
      encodeString(format(x), quote = if (is.character(x)) "\"" else ""),
      ")"
    )
  }
  what
}

# `{.arg arg} must be <must>.` / `It is <x described>.`, classed.
abort_argument <- function(x, must, class, arg, call, hint = NULL) {
  abort_customgrad(
    c(
      paste0("{.arg {arg}} must be ", must, "."),
      "x" = "It is {describe_object(x)}.",
      "i" = hint
    ),
    class = class,
    call = call
  )
}

# An rlang checker's error, with customgrad's classes in front.
with_customgrad_class <- function(expr, class) {
  withCallingHandlers(expr, rlang_error = function(cnd) {
    class(cnd) <- c(
      paste0("customgrad_error_", class),
      "customgrad_error",
      class(cnd)
    )
    stop(cnd)
  })
}

check_function <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  check_required(x, arg = arg, call = call)
  if (!is.function(x)) {
    abort_argument(x, "a function", "not_function", arg, call)
  }
  invisible(x)
}

# rlang's message (with its "Did you mean"), customgrad's classes.
check_backend <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  with_customgrad_class(
    rlang::arg_match0(x, backend_names, arg_nm = arg, error_call = call),
    "backend_unknown"
  )
}

# An argument without a default that the caller left out (R would say so
# only where it is first used, inside customgrad).
check_required <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  with_customgrad_class(
    rlang::check_required(x, arg = arg, call = call),
    "bad_argument"
  )
}

# TRUE or FALSE; with `strict`, also "strict" (a `trace` argument).
check_flag <- function(
  x,
  strict = FALSE,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (!isTRUE(x) && !isFALSE(x) && !(strict && identical(x, "strict"))) {
    abort_argument(
      x,
      if (strict) {
        "{.code TRUE}, {.code FALSE} or {.val strict}"
      } else {
        "{.code TRUE} or {.code FALSE}"
      },
      if (strict) "trace_arg" else "bad_argument",
      arg,
      call
    )
  }
  x
}

# A finite number greater than `min` (with `or_min`, `min` or more),
# returned as a double; `hint`: an `i` bullet.
check_number <- function(
  x,
  min = -Inf,
  ...,
  or_min = FALSE,
  hint = NULL,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.numeric(x) && length(x) == 1 && is.finite(x)
  if (!(ok && (x > min || (or_min && x == min)))) {
    above <- if (or_min) {
      paste0(", ", min, " or more")
    } else if (is.finite(min)) {
      paste(" greater than", min)
    } else {
      ""
    }
    abort_argument(
      x,
      paste0("a finite number", above),
      "bad_argument",
      arg,
      call,
      hint
    )
  }
  as.double(x)
}

# A whole number, `from` or more (a count, or an id from 0).
check_count <- function(
  x,
  from = 1L,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (!(rlang::is_scalar_integerish(x, finite = TRUE) && x >= from)) {
    abort_argument(
      x,
      paste0("a whole number, ", from, " or more"),
      "bad_argument",
      arg,
      call
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
  ok <- rlang::is_integerish(x, finite = TRUE) &&
    length(x) > 0 &&
    all(x >= 1) &&
    !anyDuplicated(x)
  if (!ok) {
    abort_argument(
      x,
      "argument positions: distinct whole numbers from 1",
      "wrt",
      arg,
      call
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
  if (!is.null(x) && !is_tensor_tree(x)) {
    abort_argument(
      x,
      "a tensor, an R number or array, or a list of them",
      "input",
      arg,
      call
    )
  }
  invisible(x)
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
      "x" = "It returned {describe_object(x)}.",
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
  is_pair <- is.list(x) &&
    !reticulate::is_py_object(x) &&
    length(x) == 2L
  if (!is_pair) {
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
  if (!is.function(x[[2L]])) {
    abort_customgrad(
      c(
        "The second element of {.arg f}'s result must be the gradient function.",
        "x" = "It is {describe_object(x[[2L]])}."
      ),
      class = "grad_not_function",
      call = call
    )
  }
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
  invisible(x)
}

# Whether f's value holds something to differentiate: a tensor, or R
# numbers, possibly in (nested) lists; not NULL, strings or nothing.
holds_value <- function(x) {
  if (reticulate::is_py_object(x)) {
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

# `value_like` of op_custom_gradient(): NULL, the name of an argument of
# `f`, or a function of f's inputs.
check_value_like <- function(
  x,
  arg_names,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  if (is.null(x) || is.function(x)) {
    return(invisible(x))
  }
  named <- rlang::is_string(x) && nzchar(x)
  if (!named || !"..." %in% arg_names && !x %in% arg_names) {
    abort_argument(
      x,
      "the name of an argument of {.arg f}, or a function",
      "value_like",
      arg,
      call,
      hint = if (named) {
        paste0(
          "{.arg f}'s arguments are ",
          paste0("{.arg ", arg_names, "}", collapse = ", "),
          "."
        )
      }
    )
  }
  invisible(x)
}
