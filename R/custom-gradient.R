#' Define a function with a custom gradient
#'
#' `op_custom_gradient(f)` turns `f`, an R function that returns a value and
#' the rule for its gradient, into a function that is differentiable on the
#' active Keras backend: by `tape$gradient()` on TensorFlow, `jax$grad()`
#' (also under `jax$jit()`) on JAX, `$backward()` on PyTorch, and in
#' `model$fit()` on all three.
#'
#' @section The contract:
#' `h <- op_custom_gradient(f)` returns an R function with the arguments of
#' `f`. `f(...)` must return `tuple(value, grad)` (or `list(value, grad)`):
#'
#' * `value` is a tensor, or an R list (nested lists allowed) of tensors. `h()`
#'   returns it with the same structure.
#' * `grad` computes the gradient with respect to `f`'s inputs from
#'   `upstream`, the gradient with respect to `value` (with `value`'s
#'   structure). It returns one gradient per input of `f` as `tuple()` or
#'   `list()`; a gradient has its input's shape (a nested input gets a
#'   gradient of the same nesting), and `NULL` means "no gradient" (zeros).
#'   With a single input, the gradient may be returned bare.
#'
#' `grad` may be written in any of the backends' styles; customgrad reads its
#' arguments and calls it accordingly:
#'
#' * `function(..., upstream = NULL)`: works everywhere; `upstream %||% ..1`
#'   reads the upstream gradient whichever way it is passed. customgrad passes
#'   `f`'s inputs as `...` and `upstream` by name.
#' * `function(upstream)` (any one argument name): TensorFlow and JAX style,
#'   called with the upstream gradient.
#' * `function(..., upstream)`: PyTorch style, called with `f`'s inputs and
#'   `upstream`.
#' * With an argument `variables` (TensorFlow): when `f` reads TensorFlow
#'   variables it did not get as inputs, `grad` is called with `variables = `
#'   those variables and returns `list(input_gradients, variable_gradients)`.
#'
#' Inputs that are not tensors (R numbers and arrays, Python floats) are
#' converted to tensors of Keras' float type.
#'
#' @section When R runs:
#' On PyTorch and eager TensorFlow, `f` runs at each call. `grad` runs once
#' per call too: during the forward pass, recorded with a stand-in for
#' `upstream`, when `f`'s value is a single tensor and a backward pass can
#' follow; otherwise (or when it needs `upstream`'s value) at the backward
#' pass. JAX runs `grad` during the forward pass under `jax$grad()`, on
#' tracers. Inside `tf.function` or `jax$jit()` (and `model$fit()`), R runs
#' only while the function is traced. On PyTorch, differentiating the
#' gradient again (`create_graph = TRUE`) runs `f` once more in backward.
#'
#' Inside `f` and `grad`, tensor operations are recorded and run in Python
#' when the function returns (one call into Python instead of one per
#' operation); reading a value runs what it depends on first. See the
#' "Speed" section of [customgrad-package] and the option
#' `customgrad.defer_ops`.
#' R can't run on other threads: a call from a non-main thread (a `tf.data`
#' map, `tf.py_function`) is an error of class `customgrad_error_thread`.
#'
#' @section Errors:
#' An error in `f` or `grad` reaches the caller of `h()` as the original
#' condition; if a backend's own function called `h()` (such as
#' `tape$gradient()`), its message is kept. Results that would otherwise
#' fail deep inside the backend are caught first, with errors inheriting
#' `customgrad_error`: `customgrad_error_f_result` (`f` did not return two
#' elements), `customgrad_error_grad_not_function`,
#' `customgrad_error_grad_signature`, `customgrad_error_grad_count` (wrong
#' number of gradients), `customgrad_error_grad_structure`,
#' `customgrad_error_grad_shape` (a gradient's shape differs from its
#' input's), `customgrad_error_grad_variables` and `customgrad_error_op` (a
#' recorded tensor operation failed; its message names the op).
#'
#' @section Testing a custom gradient:
#' [gradcheck()] is the way to test a gradient rule: it compares the gradient
#' that autodiff gives through `grad` with central finite differences in
#' float64, element by element, and fails for a wrong rule on every backend
#' (use `error = TRUE` in tests). [op_grad()] takes the gradient itself,
#' with the same code on TensorFlow, JAX and PyTorch.
#'
#' @param f A function of tensors returning `tuple(value, grad)`.
#' @returns A function with the arguments of `f` that returns `f`'s value
#'   and is differentiated with `grad`.
#' @seealso [tuple()], [`%||%`], [gradcheck()], [op_grad()];
#'   `vignette("custom-gradients")`, `vignette("gradients")`.
#' @export
#' @examplesIf customgrad::backend_available()
#' # log(1 + exp(x)), stable at x = 100 where the naive gradient is NaN.
#' log1pexp <- op_custom_gradient(\(x) {
#'   e <- op_exp(x)
#'   grad <- function(..., upstream = NULL) {
#'     upstream <- upstream %||% ..1
#'     op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
#'   }
#'   tuple(op_log(1 + e), grad)
#' })
#' log1pexp(2)
#'
#' # Check the rule against finite differences, and take the gradient,
#' # with the same code on every backend:
#' gradcheck(log1pexp, c(-3, 0, 2.5))
#' op_grad(log1pexp)(100)
#'
#' # The same gradient with the active backend's own autodiff:
#' if (config_backend() == "tensorflow") {
#'   tf <- reticulate::import("tensorflow")
#'   x <- tf$constant(100)
#'   with(reticulate::`%as%`(tf$GradientTape(), tape), {
#'     tape$watch(x)
#'     y <- log1pexp(x)
#'   })
#'   print(tape$gradient(y, x))
#' }
#' if (config_backend() == "jax") {
#'   jax <- reticulate::import("jax")
#'   print(jax$grad(log1pexp)(100))
#'   print(jax$jit(jax$grad(log1pexp))(100)) # R runs only while tracing
#' }
#' if (config_backend() == "torch") {
#'   torch <- reticulate::import("torch", convert = FALSE)
#'   x <- torch$tensor(100, requires_grad = TRUE)
#'   log1pexp(x)$backward()
#'   print(x$grad)
#' }
#'
#' # Two inputs, two outputs: upstream has the value's structure, and grad
#' # returns one gradient per input.
#' sum_and_product <- op_custom_gradient(function(x, y) {
#'   grad <- function(upstream) {
#'     list(upstream[[1]] + upstream[[2]] * y, upstream[[1]] + upstream[[2]] * x)
#'   }
#'   tuple(list(x + y, x * y), grad)
#' })
#' sum_and_product(2, 3)
op_custom_gradient <- function(f) {
  check_function(f)
  state <- new.env(parent = emptyenv())
  # convert = FALSE: tensors reach R without reticulate's conversion
  # dispatch (~40 us each for a JAX tracer); lists are converted below.
  state$forward <- r_callback(
    function(..., released = NULL, record = NULL) {
      inputs <- lapply(list(...), function(x) {
        if (inherits(x, py_containers)) reticulate::py_to_r(x) else x
      })
      if (!is.null(released)) {
        released <- reticulate::py_to_r(released)
      }
      record <- is.null(record) || isTRUE(reticulate::py_to_r(record))
      custom_gradient_forward(f, inputs, released, record)
    },
    convert = FALSE
  )
  fmls <- formals(args(f)) %||% alist(... = )
  inputs <- lapply(names(fmls), as.symbol)
  body <- rlang::expr(call_custom_gradient(.customgrad_state, list(!!!inputs)))
  env <- rlang::env(ns_env(), .customgrad_state = state)
  h <- rlang::new_function(fmls, body, env)
  class(h) <- c("customgrad_function", "function")
  h
}

#' @export
print.customgrad_function <- function(x, ...) {
  cat(
    "<customgrad function>(",
    paste(names(formals(x)), collapse = ", "),
    ")\n",
    sep = ""
  )
  invisible(x)
}

# Handed to Python (jax$grad(h), tf$`function`(h), a Keras Lambda layer), a
# custom-gradient function is its Python callable: no R in between.
#' @exportS3Method reticulate::r_to_py
r_to_py.customgrad_function <- function(x, convert = FALSE) {
  custom_gradient_callable(environment(x)$.customgrad_state)
}

#' Group values into a tuple
#'
#' `tuple(value, grad)` is how a custom-gradient function returns its value
#' and gradient rule, and `tuple(g1, g2)` how a gradient rule returns one
#' gradient per input. It is an R list, so R functions inside it stay R
#' functions.
#'
#' @param ... Values.
#' @returns A list of class `customgrad_tuple`.
#' @export
#' @examples
#' tuple(1, "a")
tuple <- function(...) {
  x <- list(...)
  class(x) <- "customgrad_tuple"
  x
}

#' @export
print.customgrad_tuple <- function(x, ...) {
  cat("<tuple of ", length(x), ">\n", sep = "")
  print(unclass(x), ...)
  invisible(x)
}

ns_env <- function() asNamespace("customgrad")

py_containers <- c(
  "python.builtin.list",
  "python.builtin.tuple",
  "python.builtin.dict"
)

# The body of every function that op_custom_gradient() returns.
call_custom_gradient <- function(state, inputs) {
  fn <- custom_gradient_callable(state)
  out <- with_python_errors(
    py_call_fast(fn, lapply(inputs, as_python_input)),
    call = sys.call(-1)
  )
  if (inherits(out, c("python.builtin.list", "python.builtin.dict"))) {
    out <- py_nest_to_r(out)
  }
  out
}

# The Python callable behind a custom-gradient function, made on first use
# (so that defining one does not start Python).
custom_gradient_callable <- function(state) {
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    fn <- state$py <- customgrad_py()$custom_gradient(state$forward)
  }
  fn
}

# reticulate turns an R vector of length > 1 into a Python list, which would
# read as a nested input: send vectors and arrays as NumPy arrays instead.
# (Python converts them, and R numbers, to tensors of Keras' float type.)
as_python_input <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    return(x)
  }
  if (is.list(x)) {
    return(lapply(x, as_python_input))
  }
  if (is.atomic(x) && (length(x) != 1 || !is.null(dim(x)))) {
    return(reticulate::np_array(x))
  }
  x
}

# Called from Python with f's inputs: run f, check its result, and return
# the value, the handle of grad's R callback (see run_grad(); NULL when grad
# was recorded), the tape of the ops f recorded, the ids the tape gives f's
# inputs (deferred.R), and grad recorded ahead (record_grad()) or NULL. `released` are handles Python
# no longer needs; `record = FALSE` when no backward pass will follow.
custom_gradient_forward <- function(f, inputs, released = NULL, record = TRUE) {
  release_grads(released)
  session <- open_session(inputs)
  on.exit(close_session(session))
  result <- do.call(f, inputs)
  check_custom_gradient_result(result)
  value <- result[[1]]
  convention <- grad_convention(result[[2]])
  recorded <- if (record) {
    record_grad(result[[2]], convention, inputs, session, value)
  }
  # A recorded grad is all the backward pass needs: no R callback waits.
  handle <- if (is.null(recorded)) {
    register_grad(grad_callback(result[[2]], convention, inputs, session))
  }
  list(
    encode_deferred(value, session),
    handle,
    session$tape %||% list(),
    as.list(session$known_ids),
    recorded
  )
}

# grad recorded during the forward pass, with a placeholder for upstream:
# when grad only records ops, the backward pass runs its tape in Python and
# needs no call into R (a Python-to-R call costs more than any op). If grad
# needs upstream's value, reads TensorFlow variables, or fails, NULL: grad
# then runs in the backward pass as usual. Only for a single-tensor value.
record_grad <- function(grad, convention, inputs, forward_session, value) {
  if (
    is.null(forward_session) ||
      convention$variables ||
      !inherits(value, c("python.builtin.object", "customgrad_deferred"))
  ) {
    return(NULL)
  }
  session <- open_session(parent = forward_session)
  on.exit(close_session(session))
  upstream <- placeholder_node(session)
  failed <- FALSE
  grads <- tryCatch(
    do.call(grad, grad_args(convention, inputs, upstream)),
    error = function(cnd) failed <<- TRUE
  )
  if (failed) {
    return(NULL)
  }
  list(
    encode_deferred(grads, session),
    session$tape,
    .subset2(upstream, "id")
  )
}

# grad callbacks wait here, by handle, for Python's backward pass: one R
# callback (run_grad) serves them all, so a forward call does not make a
# new Python callable.
register_grad <- function(fn) {
  handle <- the$grad_handle <- the$grad_handle + 1
  assign(as.character(handle), fn, envir = the$grads)
  handle
}

release_grads <- function(released) {
  if (length(released) > 0) {
    rm(list = as.character(unlist(released)), envir = the$grads)
  }
}

run_grad <- function(handle, upstream, variables = NULL) {
  if (is.null(handle)) {
    # grad was recorded, so it has no `variables` argument, but TensorFlow
    # asks for the gradients of variables that f read.
    abort_grad_variables(length(variables))
  }
  fn <- get(as.character(handle), envir = the$grads, inherits = FALSE)
  fn(upstream, variables)
}

check_custom_gradient_result <- function(result, call = NULL) {
  if (
    is.list(result) &&
      length(result) == 2L &&
      is.function(result[[2L]]) &&
      !inherits(result, "python.builtin.object")
  ) {
    return(invisible(result))
  }
  if (
    !is.list(result) ||
      inherits(result, "python.builtin.object") ||
      length(result) != 2
  ) {
    abort_customgrad(
      c(
        "{.arg f} must return {.code tuple(value, grad)}.",
        "x" = "It returned {describe_object(result)}.",
        "i" = "Return the value together with its gradient function, such as {.code tuple(y, function(upstream) upstream * dy_dx)}."
      ),
      class = "f_result",
      call = call
    )
  }
  if (!is.function(result[[2]])) {
    abort_customgrad(
      c(
        "The second element of {.arg f}'s result must be the gradient function.",
        "x" = "It is {describe_object(result[[2]])}."
      ),
      class = "grad_not_function",
      call = call
    )
  }
  invisible(result)
}

# How grad wants to be called, read from its formals (in R: once a closure
# has gone to Python its formals can't be read any more).
grad_convention <- function(grad, call = NULL) {
  fmls <- names(if (is.primitive(grad)) formals(args(grad)) else formals(grad))
  if (length(fmls) == 0) {
    abort_customgrad(
      c(
        "The gradient function must take the upstream gradient as an argument.",
        "i" = "Write it as {.code function(..., upstream = NULL)} or {.code function(upstream)}."
      ),
      class = "grad_signature",
      call = call
    )
  }
  named <- any(fmls == "upstream")
  list(
    # function(..., upstream) and function(x, upstream) also get the inputs
    inputs = named && length(fmls) > 1L + any(fmls == "variables"),
    named = named,
    variables = any(fmls == "variables")
  )
}

# The arguments grad is called with, in its style (see grad_convention()).
grad_args <- function(convention, inputs, upstream) {
  args <- if (convention$inputs) inputs else list()
  if (convention$named) {
    c(args, list(upstream = upstream))
  } else {
    c(args, list(upstream))
  }
}

grad_callback <- function(grad, convention, inputs, forward_session = NULL) {
  function(upstream, variables = NULL) {
    args <- grad_args(convention, inputs, upstream)
    if (!is.null(variables)) {
      if (!convention$variables) {
        abort_grad_variables(length(variables))
      }
      args$variables <- variables
    }
    session <- open_session(list(upstream), parent = forward_session)
    on.exit(close_session(session))
    grads <- encode_deferred(do.call(grad, args), session)
    list(grads, session$tape %||% list(), as.list(session$known_ids))
  }
}

abort_grad_variables <- function(n) {
  abort_customgrad(
    c(
      "{.arg f} read {n} TensorFlow variable{?s} that {?is/are} not among its inputs, but the gradient function has no {.arg variables} argument.",
      "i" = "{cli::qty(n)}Pass the variable{?s} to the function as input{?s}, or give the gradient function a {.arg variables} argument and return {.code list(input_gradients, variable_gradients)}."
    ),
    class = "grad_variables",
    call = NULL
  )
}
