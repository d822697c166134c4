#' Gradients of R functions on any backend
#'
#' `op_grad(f)` transforms `f`, an R function of tensors that returns a
#' scalar, into a function that returns the gradient of `f` with respect to
#' its first argument (or the arguments `wrt` names). `op_value_and_grad(f)`
#' returns the value of `f` and the gradient together. The same R code runs
#' on TensorFlow, JAX and PyTorch, and custom gradients made with
#' [op_custom_gradient()] are used.
#'
#' @section Arguments and results:
#' `g <- op_grad(f, wrt)` has the arguments of `f`. The arguments `wrt`
#' refers to (by position, 1-based, as `f` is called) are tensors, R numbers
#' or arrays (converted to tensors like the inputs of
#' [op_custom_gradient()], integers as doubles), or nested lists of
#' these; the other arguments reach `f` unchanged. The gradient of an
#' argument has its shape and nesting: a list `list(w = ..., b = ...)` gets
#' a gradient `list(w = ..., b = ...)`. With several `wrt`, `g()` returns a
#' list with one gradient per argument, named after the arguments.
#'
#' Without `upstream`, `f` must return a scalar (one tensor with one
#' element; reduce with `sum()` or `mean()`). With `upstream`, a tensor or R
#' array with the shape of `f`'s value (or a list matching a list value),
#' `op_grad()` computes the vector-Jacobian product: the gradient of
#' `sum(upstream * f(...))`. For an upstream that changes from call to call,
#' write it into the function: `op_grad(function(x, u) sum(f(x) * u))`.
#'
#' @section Backends:
#' * TensorFlow: a `tf$GradientTape()`. Works eagerly and inside
#'   `tf.function` ([op_compile()]).
#' * JAX: `jax$vjp()`, so `g` works under `jax$jit()` ([op_compile()]) and
#'   inside `jax$grad()`.
#' * PyTorch: `torch$autograd$grad()` on fresh leaf tensors; the caller's
#'   tensors keep their `requires_grad` and `$grad`. When torch's grad mode
#'   is on (the default), the gradient is built with `create_graph = TRUE`:
#'   it can be differentiated again, and tensors that require gradients
#'   (say a model's weights read by `f`) get gradients through it. Under
#'   `torch$no_grad()` the result is a plain tensor.
#'
#' Gradients of gradients work on all three by composition:
#' `op_grad(op_grad(f))` is the second derivative.
#'
#' @section When R runs:
#' `f` runs once per call of `g`, under the backend's autodiff. Inside a
#' compiled function ([op_compile()], `jax$jit()`, `tf.function`) it runs
#' only while the function is traced.
#'
#' @section Errors:
#' Errors in `f` reach the caller as the original condition. customgrad's
#' own errors inherit `customgrad_error`: `customgrad_error_wrt` (a `wrt`
#' that is not an argument), `customgrad_error_not_scalar` (`f` returned
#' more than one number without `upstream`), `customgrad_error_upstream`
#' (`upstream` doesn't match `f`'s value), `customgrad_error_wrt_dtype` (an
#' integer tensor to differentiate) and `customgrad_error_input` (an
#' argument that can't become a tensor).
#'
#' @param f A function of tensors. Without `upstream` it must return a
#'   scalar.
#' @param wrt Positions (1-based) of the arguments to differentiate with
#'   respect to; several are allowed.
#' @param upstream `NULL`, or the upstream gradient for a vector-Jacobian
#'   product: a tensor or R array with the shape of `f`'s value, or a list
#'   of them matching a list value.
#' @returns A function with the arguments of `f`. `op_grad()`'s returns the
#'   gradient: a tensor (or a list with the argument's nesting) for one
#'   `wrt`, a list of them for several. `op_value_and_grad()`'s returns
#'   `list(value = , grad = )`.
#' @seealso [gradcheck()] to check a gradient against finite differences,
#'   [op_compile()] to run it compiled; `vignette("gradients")`.
#' @export
#' @examplesIf customgrad::backend_available()
#' # d/dx sin(x) = cos(x)
#' dsin <- op_grad(sin)
#' dsin(1)
#' cos(1)
#'
#' # Second derivative: -sin(x)
#' op_grad(op_grad(sin))(1)
#'
#' # Several arguments, nested lists
#' loss <- function(x, p) sum(p$w * x^2) + p$b
#' op_grad(loss, wrt = 2)(c(1, 2), list(w = c(3, 4), b = 5))
#' op_value_and_grad(loss, wrt = 1:2)(c(1, 2), list(w = c(3, 4), b = 5))
#'
#' # A custom gradient is used: log(1 + exp(x)) has gradient 1 at x = 100.
#' log1pexp <- op_custom_gradient(\(x) {
#'   e <- op_exp(x)
#'   grad <- function(upstream) op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
#'   tuple(op_log(1 + e), grad)
#' })
#' op_grad(log1pexp)(100)
#'
#' # Vector-Jacobian product of a function with a vector value
#' op_grad(exp, upstream = c(1, 10))(c(0, 1))
op_grad <- function(f, wrt = 1L, upstream = NULL) {
  label <- rlang::enexpr(f)
  g <- new_grad_transform(f, wrt, upstream, with_value = FALSE)
  label_transform(g, label)
}

#' @rdname op_grad
#' @export
op_value_and_grad <- function(f, wrt = 1L, upstream = NULL) {
  label <- rlang::enexpr(f)
  g <- new_grad_transform(f, wrt, upstream, with_value = TRUE)
  label_transform(g, label)
}

new_grad_transform <- function(
  f,
  wrt,
  upstream,
  with_value,
  call = rlang::caller_env()
) {
  check_function(f, call = call)
  wrt <- check_wrt(wrt, f, call = call)
  check_tensor_tree(upstream, arg = "upstream", call = call)
  state <- new.env(parent = emptyenv())
  state$f <- f
  state$wrt <- wrt
  state$upstream <- upstream
  state$with_value <- with_value
  new_transform(f, state, "call_grad_transform")
}

# The body of every function that op_grad() returns.
call_grad_transform <- function(state, args, call) {
  if (max(state$wrt) > length(args)) {
    abort_wrt_missing(state$wrt, length(args), call)
  }
  inputs <- lapply(state$wrt, function(i) {
    as_input(
      args[[i]],
      argument_label(args, i),
      call = call,
      differentiable = TRUE
    )
  })
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    # Made on first call: defining the function does not start Python.
    py <- autodiff_py()
    callback <- state_callback(state, grad_transform_forward)
    fn <- state$py <- py$value_and_grad(
      callback,
      positions = as.list(state$wrt)
    )
  }
  if (!is.null(state$upstream) && is.null(state$upstream_py)) {
    state$upstream_py <- as_input(
      state$upstream,
      "`upstream`",
      call = call,
      differentiable = TRUE
    )
  }
  # f's other arguments stay in R; the callback reads them from here.
  previous <- state$frame
  state$frame <- list(args = args, call = call)
  on.exit(state$frame <- previous, add = TRUE)
  out <- with_python_errors(
    do.call(fn, c(list(state$upstream_py), unname(inputs))),
    call = call
  )
  grads <- out$grad
  if (length(state$wrt) == 1) {
    grads <- grads[[1]]
  } else {
    labels <- names(args)[state$wrt]
    if (!is.null(labels) && any(nzchar(labels))) names(grads) <- labels
  }
  if (state$with_value) list(value = out$value, grad = grads) else grads
}

# Called from Python with the arguments to differentiate.
grad_transform_forward <- function(state, ...) {
  abort_if_stack_low()
  inputs <- list(...)
  frame <- state$frame
  args <- frame$args
  args[state$wrt] <- inputs
  value <- call_wrapped(state, args, call = frame$call)
  value <- as_input(
    value,
    "The value of `f`",
    call = frame$call,
    differentiable = TRUE
  )
  if (is.null(state$upstream)) {
    check_scalar_value(value, call = frame$call)
  }
  value
}

# --- Shared by op_grad(), gradcheck() and op_compile() ----------------------

# customgrad's Python module for gradients
# (inst/python/customgrad/_autodiff.py).
autodiff_py <- function() {
  customgrad_py("_autodiff")
}

# A function with f's arguments whose body calls `fun(state, args, call)`.
new_transform <- function(f, state, fun) {
  fmls <- transform_formals(f)
  inputs <- lapply(names(fmls), as.symbol)
  names(inputs) <- ifelse(names(fmls) == "...", "", names(fmls))
  body <- rlang::call2(
    fun,
    quote(.customgrad_state),
    rlang::call2("list", !!!inputs),
    quote(sys.call())
  )
  env <- rlang::env(rlang::ns_env("customgrad"), .customgrad_state = state)
  rlang::new_function(fmls, body, env)
}

# Call the function a transform wraps by the name the caller gave it, so
# that an error inside it names `h(x = x)` rather than the function's
# deparsed source. A function the caller gave no name is called `f()`;
# customgrad's own errors about that call (a wrapped op_grad() whose value
# is not a scalar) name `call` instead, the caller's call of the transform:
# `f()` is not a function the caller knows.
call_wrapped <- function(state, args, call = NULL) {
  name <- state$label
  named <- !is.null(name) && identical(make.names(name), name)
  if (!named) {
    name <- "f"
  }
  arg_names <- names(args) %||% character(length(args))
  vars <- ifelse(nzchar(arg_names), arg_names, paste0("arg", seq_along(args)))
  if (name %in% vars) {
    name <- ".wrapped"
  }
  env <- new.env(parent = emptyenv())
  env[[name]] <- state$f
  for (i in seq_along(args)) {
    env[[vars[[i]]]] <- args[[i]]
  }
  call_args <- lapply(vars, as.symbol)
  names(call_args) <- arg_names
  wrapped <- as.call(c(as.symbol(name), call_args))
  if (named || is.null(call)) {
    return(eval(wrapped, env))
  }
  tryCatch(eval(wrapped, env), customgrad_error = function(cnd) {
    if (identical(.subset2(cnd, "call"), wrapped)) {
      cnd <- with_call(cnd, call)
    }
    stop(cnd)
  })
}

# `cnd` with `call` (whatever methods its classes have for `$<-`).
with_call <- function(cnd, call) {
  classes <- class(cnd)
  cnd <- unclass(cnd)
  cnd$call <- call
  structure(cnd, class = classes)
}

# What a transform prints: its kind, arguments, and the function it wraps
# as the caller wrote it (`sin`, `function(x) ...`).
label_transform <- function(fn, expr) {
  environment(fn)$.customgrad_state$label <- rlang::as_label(expr)
  class(fn) <- c("customgrad_transform", "function")
  fn
}

#' @export
print.customgrad_transform <- function(x, ...) {
  state <- environment(x)$.customgrad_state
  kind <- if (!is.null(state$wrt)) {
    if (isTRUE(state$with_value)) "value and gradient" else "gradient"
  } else {
    "compiled function"
  }
  cat_function_header(kind, x)
  cat("  of: ", state$label, "\n", sep = "")
  if (!is.null(state$wrt)) {
    args <- names(formals(x))[state$wrt]
    shown <- ifelse(
      is.na(args) | args == "...",
      paste0("argument ", state$wrt),
      paste0("`", args, "`")
    )
    cat("  with respect to: ", paste(shown, collapse = ", "), "\n", sep = "")
  }
  invisible(x)
}

# Prints a header such as "<customgrad gradient>(x, p)".
cat_function_header <- function(kind, fn) {
  cat(
    "<customgrad ",
    kind,
    ">(",
    paste(names(formals(fn)), collapse = ", "),
    ")\n",
    sep = ""
  )
}

transform_formals <- function(f) {
  formals(args(f)) %||% alist(... = )
}

abort_wrt_missing <- function(wrt, n, call) {
  abort_customgrad(
    c(
      "Can't differentiate with respect to argument {max(wrt)}.",
      "x" = "The function was called with {n} argument{?s}."
    ),
    class = "wrt",
    call = call
  )
}

is_tensor_tree <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(TRUE)
  }
  if (is.list(x)) {
    return(all(vapply(x, is_tensor_tree, TRUE)))
  }
  is.numeric(x) || is.logical(x)
}

# "Argument `x`", or "Argument 2" for an unnamed one.
argument_label <- function(args, i) {
  name <- names(args)[[i]] %||% ""
  if (nzchar(name)) paste0("Argument `", name, "`") else paste0("Argument ", i)
}

has_one_element <- function(x) {
  if (!inherits(x, "python.builtin.object")) {
    return(FALSE)
  }
  d <- tryCatch(tensor_shape(x), error = function(cnd) NULL)
  all(is.na(d) | d == 1L)
}
