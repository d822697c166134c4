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
#' these. The other arguments become tensors where they are R numbers or
#' arrays; any other value (a string, `NULL`, a data frame) reaches `f` as
#' it is. The gradient of an
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
#'   is on (the default), the gradient is built with `create_graph = TRUE`
#'   where a later `$backward()` may need it: when an input carries
#'   autograd history, when `f` reads tensors that require gradients (say a
#'   model's weights: a gradient penalty's `$backward()` reaches them), or
#'   inside another `op_grad()`. Otherwise, and under `torch$no_grad()`,
#'   the result is a plain tensor, which holds no graph while R keeps it.
#'
#' Gradients of gradients work on all three by composition:
#' `op_grad(op_grad(f))` is the second derivative.
#'
#' @section When R runs:
#' As for [op_custom_gradient()], `f` runs once per input signature (the
#' nesting, shapes and dtypes of the arguments, and the values of those that
#' are not tensors), on Keras symbolic tensors: Keras records the
#' operations it calls, and every later call with that signature replays
#' them in Python under the backend's autodiff, without R. A training step
#' written as `g(w, x, y)` is then one call from R into Python, which
#' returns only the gradients (and, from `op_value_and_grad()`, the value);
#' a new batch of data is a new input, not a new trace (see "Arguments and
#' results").
#'
#' R values that `f` reads from outside its arguments, what a trace can't
#' hold (a tensor's value read in R, random numbers), `trace = FALSE` and
#' `trace = "strict"`, and side effects follow the rules of
#' [op_custom_gradient()], "When R runs": in short, pass values that
#' change as arguments (`op_grad(function(w, x, y) loss(w, x, y))`); a
#' function that can't be traced runs `f` at every call, after a one-time
#' message saying why. A gradient function called inside another's
#' `f` (`op_grad(op_grad(f))`) is recorded as one operation and replayed
#' too. Inside a compiled function ([op_compile()], `jax$jit()`,
#' `tf.function`) `g` runs the replay, traced by the backend's compiler.
#' Called eagerly on TensorFlow and JAX, `g` runs each signature's replay
#' compiled (`tf.function`, `jax.jit`): one program rather than an eager
#' call per operation. On TensorFlow from a signature's second call on
#' (its first runs eagerly, which costs less than tracing a
#' `tf.function`); on JAX from the first, where an eager call would
#' compile each operation for its shapes, unless the same programs were
#' compiled before: then `g` is most likely made anew, as
#' `op_grad(f)(x)` in a loop, and its first call runs eagerly rather than
#' pay a compile a call. A signature the compiler refuses (on JAX, an op
#' whose output shape depends on values, such as `op_nonzero()`) runs
#' eagerly.
#'
#' @section Errors:
#' Errors in `f` reach the caller as the original condition. While `f` is
#' traced, one with a class of its own (`rlang::abort(class = )`, or
#' customgrad's) is raised at once; a plain `stop()` there is taken for
#' something tracing can't hold (see "When R runs"), and the call that runs
#' `f` in R then raises it. customgrad's own errors (a `wrt` that is not an
#' argument, a value that is not a scalar without `upstream`, an integer
#' tensor to differentiate) inherit `customgrad_error`; [customgrad_errors]
#' lists each class.
#'
#' @param f A function of tensors. Without `upstream` it must return a
#'   scalar.
#' @param wrt Positions (1-based) of the arguments to differentiate with
#'   respect to; several are allowed.
#' @param upstream `NULL`, or the upstream gradient for a vector-Jacobian
#'   product: a tensor or R array with the shape of `f`'s value, or a list
#'   of them matching a list value.
#' @param trace `TRUE` (the default) to trace `f` once per input signature
#'   and replay it without R, falling back to calling `f` at every call
#'   where it can't be traced; `FALSE` to always call `f`; `"strict"` to
#'   make a function that can't be traced an error. See "When R runs".
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
#'   grad <- function(upstream) upstream / (1 + op_exp(-x))
#'   tuple(op_relu(x) + op_log1p(op_exp(-op_abs(x))), grad)
#' })
#' op_grad(log1pexp)(100)
#'
#' # Vector-Jacobian product of a function with a vector value
#' op_grad(exp, upstream = c(1, 10))(c(0, 1))
#'
#' # R's random numbers can't be traced (a trace would fix one draw): R
#' # runs f at every call, after a one-time message (trace = FALSE: none).
#' noisy <- op_grad(function(x) sum(x * stats::rnorm(length(x))))
#' noisy(c(1, 2))
op_grad <- function(f, wrt = 1L, upstream = NULL, trace = TRUE) {
  check_required(f)
  label <- rlang::enexpr(f)
  g <- new_grad_transform(f, wrt, upstream, trace, with_value = FALSE)
  label_transform(g, label)
}

#' @rdname op_grad
#' @export
op_value_and_grad <- function(f, wrt = 1L, upstream = NULL, trace = TRUE) {
  check_required(f)
  label <- rlang::enexpr(f)
  g <- new_grad_transform(f, wrt, upstream, trace, with_value = TRUE)
  label_transform(g, label)
}

new_grad_transform <- function(
  f,
  wrt,
  upstream,
  trace,
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
  state$trace <- check_flag(trace, strict = TRUE, call = call)
  state$with_value <- with_value
  state$statics <- new.env(parent = emptyenv()) # non-tensor arguments
  new_transform(f, state, "call_grad_transform")
}

# The body of every function that op_grad() returns: every argument goes
# to Python (those differentiated as tensors; the others as tensors where
# they are R numbers or arrays, else as markers for their R values), which
# runs f traced (_traced_function.py) under the backend's autodiff.
call_grad_transform <- function(state, args, call) {
  if (max(state$wrt) > length(args)) {
    abort_wrt_missing(state$wrt, length(args), call)
  }
  inputs <- lapply(seq_along(args), function(i) {
    if (reticulate::is_py_object(args[[i]])) {
      return(args[[i]]) # a tensor, the usual call: nothing to convert
    }
    what <- argument_label(args, i)
    if (i %in% state$wrt) {
      return(as_input(args[[i]], what, call = call, differentiable = TRUE))
    }
    # Reaches f as it was given where it is no tensor (a label, a data
    # frame); its key then enters the trace's signature.
    tryCatch(
      as_input(args[[i]], what, call = call, state = state),
      customgrad_error_input = function(cnd) static_input(args[[i]], state),
      customgrad_error_na = function(cnd) static_input(args[[i]], state)
    )
  })
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    # Made on first call: defining the function does not start Python.
    state$traced <- traced_function(
      state,
      grad_transform_forward,
      grad_transform_kind(state)
    )
    if (!isFALSE(state$trace)) {
      state$captured <- captured_bindings(state$f)
    }
    fn <- state$py <- customgrad_py()$value_and_grad(
      state$traced,
      positions = as.list(state$wrt),
      wrt = as.list(state$wrt - 1L),
      grads_only = !state$with_value
    )
  }
  if (!is.null(state$captured)) {
    kind <- grad_transform_kind(state)
    watch_captures(state, state$traced, transform_what(state, kind), kind, call)
  }
  if (!is.null(state$upstream) && is.null(state$upstream_py)) {
    state$upstream_py <- as_input(
      state$upstream,
      "`upstream`",
      call = call,
      differentiable = TRUE
    )
  }
  # The caller's call, for f's errors.
  previous <- state$frame
  state$frame <- list(call = call)
  on.exit(state$frame <- previous, add = TRUE)
  # py_call(), not reticulate's R function around `fn`, which costs more;
  # the reply converted as custom-gradient results are (as_r_result()).
  out <- with_python_errors(
    do.call(
      reticulate::py_call,
      c(list(fn, state$upstream_py), with_names_marker(inputs, args, state))
    ),
    call = call
  )
  out <- as_r_result(out, call = call)
  grads <- if (state$with_value) out$grad else out
  if (state$with_value && length(state$wrt) == 1) {
    grads <- grads[[1]]
  }
  if (length(state$wrt) > 1) {
    labels <- names(args)[state$wrt]
    if (!is.null(labels) && any(nzchar(labels))) names(grads) <- labels
  }
  if (state$with_value) list(value = out$value, grad = grads) else grads
}

# Called from Python with all of f's arguments (symbolic tensors while
# tracing, see trace.R): f's value, checked.
grad_transform_forward <- function(state, ..., tracing = FALSE) {
  abort_if_stack_low()
  frame <- state$frame
  args <- without_names_marker(list(...), state)
  run <- function() {
    value <- as_input(
      call_wrapped(state, args, call = frame$call),
      "The value of `f`",
      call = frame$call,
      differentiable = TRUE
    )
    if (is.null(state$upstream)) {
      check_scalar_value(value, call = frame$call)
    }
    value
  }
  if (tracing) {
    return(reply_trace_failed_on_error(run_traced(run(), state$f)))
  }
  run()
}

# A transform's arguments for Python, all by position, with a marker for
# their names last: the names enter the trace's signature, so that
# `g(x = a, y = b)` and `g(y = b, x = a)` replay traces of their own.
with_names_marker <- function(inputs, args, state) {
  arg_names <- names(args) %||% character(length(args))
  # Made once per set of names: a step's call skips hashing them again.
  kept <- identical(state$marked_names, arg_names) &&
    exists(state$names_marker_key, envir = state$statics, inherits = FALSE)
  if (!kept) {
    marker <- static_input(arg_names, state)
    # Converted once: r_to_py() of a marker costs more than the step.
    state$names_marker <- reticulate::r_to_py(marker)
    state$names_marker_key <- marker$key
    state$marked_names <- arg_names
  }
  c(unname(inputs), list(state$names_marker))
}

# The arguments from Python, named again, R values back in place of markers.
without_names_marker <- function(inputs, state) {
  inputs <- restore_statics(inputs, state$statics)
  n <- length(inputs)
  args <- inputs[-n]
  names(args) <- inputs[[n]]
  args
}

# The Python side of an R function that runs traced (see
# _traced_function.py): `forward(state, ..., tracing)` is called with the
# arguments; `kind` names the transform in the one-time fallback message.
traced_function <- function(state, forward, kind) {
  callbacks <- trace_callbacks(transform_what(state, kind), kind)
  customgrad_py()$TracedFunction(
    state_callback(state, forward),
    trace = state$trace,
    notify = callbacks$notify,
    warn_retrace = callbacks$warn_retrace,
    max_traces = max_traces()
  )
}

grad_transform_kind <- function(state) {
  if (state$with_value) "op_value_and_grad" else "op_grad"
}

# How messages name a transform: `op_grad(f)`, with f as the caller wrote it.
transform_what <- function(state, kind) {
  sprintf("`%s(%s)`", kind, state$label)
}

# The one-time message and the retrace warning of a traced function, made
# apart from its state: Python keeps them, and must not keep the state.
trace_callbacks <- function(what, kind) {
  force(what) # a promise would hold the caller's frame, the state with it
  force(kind)
  list(
    notify = r_callback(function(reason) {
      inform_fallback(reason, what = what, kind = kind)
    }),
    warn_retrace = r_callback(function(count) {
      warn_retrace(count, what = what, kind = kind)
    })
  )
}

# --- Shared by op_grad(), gradcheck() and op_compile() ----------------------

# A function with f's arguments whose body calls `fun(state, args, call)`,
# after the collection deferred, if any: run from here, before `fun`'s
# frame exists, the collection does not keep this call's result alive.
new_transform <- function(f, state, fun) {
  fmls <- transform_formals(f)
  inputs <- lapply(names(fmls), as.symbol)
  names(inputs) <- ifelse(names(fmls) == "...", "", names(fmls))
  body <- rlang::call2(
    "{",
    quote(collect_if_deferred()),
    rlang::call2(
      fun,
      quote(.customgrad_state),
      rlang::call2("list", !!!inputs),
      quote(sys.call())
    )
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
      cnd <- with_condition_call(cnd, call)
    }
    stop(cnd)
  })
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
  if (reticulate::is_py_object(x)) {
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
  if (!reticulate::is_py_object(x)) {
    return(FALSE)
  }
  d <- tryCatch(tensor_shape(x), error = function(cnd) NULL)
  all(is.na(d) | d == 1L)
}
