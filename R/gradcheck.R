#' Check a gradient against finite differences
#'
#' `gradcheck(f, ...)` compares the gradient that automatic differentiation
#' gives for `f` at the inputs `...` (custom gradients made with
#' [op_custom_gradient()] included) with central finite differences, element
#' by element, in float64. It is the way to test a custom gradient: a wrong
#' gradient rule fails the check.
#'
#' @section How it checks:
#' The inputs are cast to float64 (on JAX, 64-bit mode is switched on for
#' the duration of the check, and on JAX and PyTorch Keras' habit of
#' computing some float64 ops in float32 is switched off; both are restored
#' afterwards). For each input element \eqn{x_i}, the numeric derivative is
#' \eqn{(s(x + \epsilon e_i) - s(x - \epsilon e_i)) / (2 \epsilon)}, where
#' \eqn{s} is `f`'s value reduced to one number: the value itself if it is
#' a scalar, else a weighted sum with fixed pseudo-random weights in
#' \[0.5, 1.5\] (the same on every call), so that every output element
#' counts. The autodiff gradient is that of the same \eqn{s}.
#'
#' An element passes when \eqn{|a - n| \le atol + rtol |n|} (`a` autodiff,
#' `n` numeric), as in `torch.autograd.gradcheck()`; the relative error
#' reported is \eqn{|a - n| / |n|}. `f` runs `1 + 2 * (number of elements)`
#' times, so check small inputs; a progress bar shows for long checks.
#'
#' @section What the printed numbers are:
#' The derivatives that the result, its printout and the error report show
#' (`autodiff`, `numeric`, and the errors computed from them) are those of
#' \eqn{s}, not of `f`'s value element by element. For a function with a
#' vector value they include the weights: for an elementwise `f`, the
#' element \eqn{x_i} shows \eqn{w_i f'(x_i)}, with \eqn{w_i} between 0.5
#' and 1.5, so a wrong rule that gives \eqn{g(x_i)} instead of
#' \eqn{f'(x_i)} shows autodiff \eqn{w_i g(x_i)} against numeric
#' \eqn{w_i f'(x_i)}; their ratio is free of the weight. The weights make
#' every element of the value count, where errors in a plain sum could
#' cancel out. To see `f`'s own derivatives, check a function with a scalar
#' value, which is used as it is: `gradcheck(\(x) sum(f(x)), x)` for an
#' elementwise `f`.
#'
#' @param f A function of tensors.
#' @param ... The inputs to call `f` with, by position or name: tensors, R
#'   numbers or arrays, or nested lists of them.
#' @param wrt Positions in `...` of the inputs to check; by default every
#'   input that is numeric (a tensor, an R number or array, or a list of
#'   them). The other inputs reach `f` unchanged.
#' @param eps Step of the finite differences.
#' @param atol,rtol Absolute and relative tolerance.
#' @param error If `TRUE`, a failed check is an error of class
#'   `customgrad_error_gradcheck` that names the worst element.
#' @returns A data frame of class `customgrad_gradcheck` with one row per
#'   checked input: `argument` (its name, or `..i` for the i-th input),
#'   `elements`, `failed` (the number of elements that fail),
#'   `max_abs_error`, `max_rel_error` (`NA` where every numeric derivative
#'   is 0, since only the absolute error counts there), `worst` (the
#'   element furthest out of tolerance, such as `"x[2]"`) and `pass`. Its
#'   attribute `"pass"` is `TRUE` when every element passes, and `"worst"`
#'   describes the element that is furthest out of tolerance. With
#'   `error = TRUE` it is returned invisibly.
#' @seealso [op_grad()], [op_custom_gradient()]; `vignette("gradients")`.
#' @export
#' @examplesIf customgrad::backend_available()
#' # A right custom gradient passes ...
#' log1pexp <- op_custom_gradient(\(x) {
#'   grad <- function(upstream) upstream / (1 + op_exp(-x))
#'   tuple(op_relu(x) + op_log1p(op_exp(-op_abs(x))), grad)
#' })
#' gradcheck(log1pexp, c(-2, 0, 3))
#'
#' # ... and a wrong one fails: d/dx sin(x) is cos(x), not sin(x).
#' bad_sin <- op_custom_gradient(\(x) {
#'   tuple(sin(x), function(upstream) upstream * sin(x))
#' })
#' result <- gradcheck(bad_sin, c(0.5, 1))
#' result
#' attr(result, "pass")
#' try(gradcheck(bad_sin, c(0.5, 1), error = TRUE))
#'
#' # Several and nested inputs
#' f <- function(x, p) sum(p$w * exp(x)) + p$b
#' gradcheck(f, x = c(0, 1), p = list(w = c(2, 3), b = 1))
gradcheck <- function(
  f,
  ...,
  wrt = NULL,
  eps = 1e-6,
  atol = 1e-5,
  rtol = 1e-3,
  error = FALSE
) {
  check_function(f)
  args <- list(...)
  if (length(args) == 0) {
    abort_customgrad(
      c(
        "{.fn gradcheck} needs the inputs to call {.arg f} with.",
        "i" = "Pass them after {.arg f}, as in {.code gradcheck(f, x = c(0.5, 1))}."
      ),
      class = "gradcheck_input"
    )
  }
  check_number(eps, min = 0)
  check_number(atol, min = 0, or_min = TRUE)
  check_number(rtol, min = 0, or_min = TRUE)
  check_flag(error)
  labels <- gradcheck_labels(f, args)
  wrt <- gradcheck_wrt(wrt, args, labels)

  previous <- customgrad_py()$enable_float64()
  on.exit(customgrad_py()$restore_float64(previous), add = TRUE)
  call <- rlang::current_env()
  inputs <- lapply(wrt, function(i) {
    what <- paste0("Input `", labels[[i]], "`")
    as_input(
      args[[i]],
      what,
      call = call,
      dtype = "float64",
      differentiable = TRUE
    )
  })
  leaves <- gradcheck_leaves(inputs, labels[wrt])

  callback <- r_callback(function(...) {
    a <- args
    a[wrt] <- list(...)
    as_input(
      do.call(f, a),
      "The value of `f`",
      call = call,
      differentiable = TRUE
    )
  })
  progress <- gradcheck_progress(sum(leaves$elements), environment())
  out <- with_python_errors(
    reticulate::py_call(
      customgrad_py()$gradcheck,
      callback,
      unname(inputs),
      eps,
      positions = as.list(wrt),
      progress = progress
    )
  )
  out <- reticulate::py_to_r(out)
  result <- gradcheck_result(
    leaves,
    out$analytic,
    out$numeric,
    out$shapes,
    labels[wrt],
    atol,
    rtol,
    eps
  )
  if (error && !attr(result, "pass")) {
    abort_gradcheck(result)
  }
  if (error) invisible(result) else result
}

#' @export
print.customgrad_gradcheck <- function(x, ...) {
  pass <- attr(x, "pass")
  if (!is.null(pass)) {
    tol <- attr(x, "tolerance")
    cat(sprintf(
      "<gradcheck: %s> eps = %s, atol = %s, rtol = %s\n",
      if (pass) "pass" else "FAIL",
      format(tol$eps),
      format(tol$atol),
      format(tol$rtol)
    ))
  }
  # Errors to 3 significant digits; "-" for a relative error where every
  # numeric derivative is 0 (only the absolute error counts there).
  error_text <- function(e) {
    ifelse(is.na(e), "-", formatC(e, digits = 3, format = "g"))
  }
  table <- data.frame(
    argument = x$argument,
    elements = x$elements,
    failed = x$failed,
    max_abs_error = error_text(x$max_abs_error),
    max_rel_error = error_text(x$max_rel_error),
    worst = ifelse(is.na(x$worst), "-", x$worst),
    pass = ifelse(x$pass, "pass", "FAIL")
  )
  print(table, row.names = FALSE, right = FALSE, ...)
  worst <- attr(x, "worst")
  if (isFALSE(pass) && !is.null(worst)) {
    cat(sprintf(
      "Worst element: %s: autodiff %s, numeric %s (derivatives of f's value reduced to one number; see ?gradcheck)\n",
      worst$element,
      format(worst$autodiff, digits = 6),
      format(worst$numeric, digits = 6)
    ))
  }
  invisible(x)
}

# "x", "p" for inputs matched to f's arguments; "..3" otherwise.
gradcheck_labels <- function(f, args) {
  n <- length(args)
  labels <- names(args) %||% rep("", n)
  fmls <- names(transform_formals(f))
  dots <- match("...", fmls)
  positional <- if (is.na(dots)) fmls else fmls[seq_len(dots - 1L)]
  free <- setdiff(positional, labels)
  unnamed <- which(!nzchar(labels))
  k <- seq_len(min(length(unnamed), length(free)))
  labels[unnamed[k]] <- free[k]
  still <- !nzchar(labels)
  labels[still] <- paste0("..", seq_len(n))[still]
  labels
}

gradcheck_wrt <- function(wrt, args, labels, call = rlang::caller_env()) {
  if (is.null(wrt)) {
    wrt <- which(vapply(args, is_number_tree, TRUE))
    if (length(wrt) == 0) {
      abort_customgrad(
        c(
          "{.fn gradcheck} found no numeric input to check.",
          "i" = "Inputs to check are tensors, R numbers or arrays, or lists of them."
        ),
        class = "gradcheck_input",
        call = call
      )
    }
    return(wrt)
  }
  wrt <- check_wrt(wrt, function(...) NULL, call = call)
  if (max(wrt) > length(args)) {
    abort_customgrad(
      c(
        "{.arg wrt} must refer to inputs in {.arg ...}.",
        "x" = "There {cli::qty(length(args))}{?is/are} {length(args)} input{?s}, and {.arg wrt} includes {max(wrt)}."
      ),
      class = "wrt",
      call = call
    )
  }
  for (i in wrt) {
    if (!is_number_tree(args[[i]])) {
      abort_customgrad(
        c(
          "Input {.arg {labels[[i]]}} must be a tensor, an R number or array, or a list of them.",
          "x" = "It is {describe_object(args[[i]])}."
        ),
        class = "gradcheck_input",
        call = call
      )
    }
  }
  wrt
}

is_number_tree <- function(x) {
  if (reticulate::is_py_object(x)) {
    return(TRUE)
  }
  if (is.list(x)) {
    return(length(x) > 0 && all(vapply(x, is_number_tree, TRUE)))
  }
  is.numeric(x)
}

# One row per leaf tensor, in the order Python flattens them: the input it
# belongs to, its path (`p$w`, `x[[2]]`) and its number of elements.
gradcheck_leaves <- function(inputs, labels) {
  rows <- list()
  walk <- function(x, input, path) {
    if (is.list(x) && !reticulate::is_py_object(x)) {
      nms <- names(x)
      for (i in seq_along(x)) {
        named <- !is.null(nms) && nzchar(nms[[i]])
        step <- if (named) paste0("$", nms[[i]]) else paste0("[[", i, "]]")
        walk(x[[i]], input, paste0(path, step))
      }
      return(invisible())
    }
    rows[[length(rows) + 1L]] <<- list(
      input = input,
      path = path,
      elements = prod(tensor_shape(x))
    )
  }
  for (i in seq_along(inputs)) {
    walk(inputs[[i]], i, labels[[i]])
  }
  data.frame(
    input = vapply(rows, `[[`, 1L, "input"),
    path = vapply(rows, `[[`, "", "path"),
    elements = vapply(rows, function(r) as.integer(r$elements), 1L)
  )
}

# A cli progress bar for checks with many elements, updated from Python.
gradcheck_progress <- function(total, env) {
  if (total < 50) {
    return(NULL)
  }
  bar <- cli::cli_progress_bar(
    "Checking gradients",
    total = total,
    .envir = env
  )
  r_callback(function(done) {
    cli::cli_progress_update(set = done, id = bar, .envir = env)
    NULL
  })
}

gradcheck_result <- function(
  leaves,
  analytic,
  numeric,
  shapes,
  labels,
  atol,
  rtol,
  eps
) {
  per_leaf <- lapply(seq_len(nrow(leaves)), function(j) {
    a <- as.vector(analytic[[j]])
    n <- as.vector(numeric[[j]])
    abs_error <- abs(a - n)
    # Against a numeric zero only the absolute error means anything.
    rel_error <- ifelse(n == 0, NA_real_, abs_error / abs(n))
    tolerance <- atol + rtol * abs(n)
    ok <- !is.na(abs_error) & abs_error <= tolerance
    score <- abs_error / tolerance
    score[is.na(score)] <- Inf
    list(a = a, n = n, abs = abs_error, rel = rel_error, ok = ok, score = score)
  })
  max_or_na <- function(x) {
    x <- x[!is.na(x)]
    if (length(x)) max(x) else NA_real_
  }
  # The element furthest out of tolerance among the leaves `js`.
  worst_of <- function(js) {
    scores <- vapply(
      per_leaf[js],
      function(p) if (length(p$score)) max(p$score) else -Inf,
      1
    )
    if (length(scores) == 0 || max(scores) == -Inf) {
      return(NULL)
    }
    j <- js[[which.max(scores)]]
    k <- which.max(per_leaf[[j]]$score)
    list(
      element = paste0(leaves$path[[j]], element_index(k, unlist(shapes[[j]]))),
      autodiff = per_leaf[[j]]$a[[k]],
      numeric = per_leaf[[j]]$n[[k]],
      abs_error = per_leaf[[j]]$abs[[k]],
      rel_error = per_leaf[[j]]$rel[[k]]
    )
  }
  rows <- lapply(seq_along(labels), function(i) {
    js <- which(leaves$input == i)
    parts <- per_leaf[js]
    ok <- unlist(lapply(parts, `[[`, "ok"))
    data.frame(
      argument = labels[[i]],
      elements = length(ok),
      failed = sum(!ok),
      max_abs_error = max_or_na(unlist(lapply(parts, `[[`, "abs"))),
      max_rel_error = max_or_na(unlist(lapply(parts, `[[`, "rel"))),
      worst = worst_of(js)$element %||% NA_character_,
      pass = all(ok)
    )
  })
  result <- do.call(rbind, rows)
  worst <- worst_of(seq_along(per_leaf))
  structure(
    result,
    class = c("customgrad_gradcheck", "data.frame"),
    pass = all(result$pass),
    worst = worst,
    tolerance = list(eps = eps, atol = atol, rtol = rtol)
  )
}

# "[2]", "[1, 3]", or "" for a scalar: the R index of the k-th element (in
# C order, as Python flattens) of a tensor of shape `shape`.
element_index <- function(k, shape) {
  if (length(shape) == 0) {
    return("")
  }
  index <- rev(as.vector(arrayInd(k, rev(shape))))
  paste0("[", paste(index, collapse = ", "), "]")
}

abort_gradcheck <- function(result, call = rlang::caller_env()) {
  worst <- attr(result, "worst")
  tol <- attr(result, "tolerance")
  num <- function(x) format(x, digits = 6)
  failing <- result[!result$pass, , drop = FALSE]
  n_failing <- nrow(failing)
  failing <- paste0(
    "`",
    failing$argument,
    "` (",
    failing$failed,
    " of ",
    failing$elements,
    " element",
    ifelse(failing$elements == 1, "", "s"),
    ")",
    collapse = ", "
  )
  worst_text <- sprintf(
    "autodiff %s, numeric %s (absolute error %s%s)",
    num(worst$autodiff),
    num(worst$numeric),
    num(worst$abs_error),
    if (is.na(worst$rel_error)) {
      ""
    } else {
      paste0(", relative error ", num(worst$rel_error))
    }
  )
  abort_customgrad(
    c(
      "The gradient of {.arg f} doesn't match finite differences.",
      "x" = "Worst element: {.code {worst$element}}: {worst_text}.",
      "x" = "{cli::qty(n_failing)}Failing input{?s}: {failing}.",
      "i" = paste(
        "Tolerance: |autodiff - numeric| <= atol + rtol * |numeric|,",
        "with atol = {num(tol$atol)} and rtol = {num(tol$rtol)}."
      )
    ),
    class = "gradcheck",
    result = result,
    call = call
  )
}
