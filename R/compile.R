#' Run an R function as a compiled function
#'
#' `op_compile(f)` returns a function that runs `f` traced and compiled.
#' As for [op_custom_gradient()] and [op_grad()], `f` runs once per input
#' signature on Keras symbolic tensors, and the operations Keras recorded
#' are replayed in Python for every later call, without R. On TensorFlow
#' and JAX that replay is compiled by the backend (`tf.function`,
#' `jax.jit`); on PyTorch it runs eagerly (PyTorch's compiler is not used).
#' A replay the backend's compiler refuses (on JAX, operations whose
#' value's shape depends on values, such as [keras3::op_nonzero()]) runs
#' eagerly instead.
#'
#' @section When R runs:
#' `f`'s R code runs only while it is traced: at the first call, and again
#' for each new combination of input shapes, dtypes, nesting and argument
#' names. That has consequences:
#'
#' * Side effects in `f` happen at tracing, not at each call: `print()`,
#'   `message()`, counters kept in R variables, writing files.
#' * R values that `f` reads from outside its arguments (global variables)
#'   are checked before each call from R: once one has changed, R runs `f`
#'   at every call, after a one-time message naming it. Pass values that
#'   change as arguments (tensors) to keep the compiled function. Keras
#'   variables that `f` captures are read at every call, and what `f`
#'   assigns to them is assigned (on JAX, their values are passed to the
#'   compiled function, as Keras' own training step does).
#' * While tracing, tensors are symbolic: they have shapes and dtypes but no
#'   values, so `as.array()` and an R `if ()` on a tensor's value can't be
#'   traced, nor can R's random numbers. After a one-time message, R runs
#'   such an `f` instead, at every call from R. Inside a function that
#'   TensorFlow or JAX compiles (a model's compiled training step, another
#'   `op_compile()` with `trace = FALSE`), R runs it when the backend
#'   compiles that function, so that what `f` computed in R then (R's
#'   random numbers included) is fixed in it. `trace = "strict"` makes such
#'   an `f` an error.
#' * `trace = FALSE` hands `f`'s R code to the backend's own compiler
#'   (`tf.function`, `jax.jit`), as Python code is compiled: R runs when
#'   the backend compiles it (on PyTorch, at every call), and what it
#'   computed in R is fixed in the compiled function.
#' * Errors in `f` are raised at tracing (the first call).
#'
#' Gradients compile too: `op_compile(op_grad(f))` traces `f` once and
#' compiles its gradient. Custom gradients made with [op_custom_gradient()]
#' work inside compiled functions.
#'
#' @param f A function of tensors that returns a tensor or a (nested) list of
#'   tensors.
#' @param trace `TRUE` (the default), `FALSE` or `"strict"`: see "When R
#'   runs".
#' @returns A function with the arguments of `f`. Its arguments are tensors,
#'   R numbers, arrays or logicals (converted to tensors like the inputs of
#'   [op_custom_gradient()]), or nested lists of these; it returns
#'   what `f` returns, as tensors.
#' @seealso [op_grad()]; `vignette("gradients")`.
#' @export
#' @examplesIf customgrad::backend_available()
#' traces <- 0
#' f <- function(x) {
#'   traces <<- traces + 1 # a side effect: runs only while tracing
#'   sum(exp(x) * x)
#' }
#' fc <- op_compile(f)
#' fc(c(1, 2))
#' fc(c(3, 4))
#' fc(c(5, 6))
#' traces # 1
#'
#' # A compiled gradient
#' op_compile(op_grad(f))(c(1, 2))
op_compile <- function(f, trace = TRUE) {
  label <- rlang::enexpr(f)
  check_function(f)
  state <- new.env(parent = emptyenv())
  state$f <- f
  state$trace <- check_flag(trace, strict = TRUE)
  state$statics <- new.env(parent = emptyenv()) # the argument names
  label_transform(new_transform(f, state, "call_compiled"), label)
}

# The body of every function that op_compile() returns: f traced once per
# input signature and replayed (_traced_function.py), compiled by the
# backend's compiler where it has one (_autodiff.compile_function()).
call_compiled <- function(state, args, call) {
  inputs <- lapply(seq_along(args), function(i) {
    as_input(args[[i]], argument_label(args, i), call = call)
  })
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    # Made on first call: defining the function does not start Python.
    state$traced <- traced_function(state, compiled_forward, "op_compile")
    if (!isFALSE(state$trace)) {
      state$captured <- captured_bindings(state$f)
    }
    fn <- state$py <- customgrad_py()$compile_function(state$traced)
  }
  if (!is.null(state$captured)) {
    what <- transform_what(state, "op_compile")
    watch_captures(state, state$traced, what, "op_compile", call)
  }
  # The call, for errors about it raised while f runs.
  previous <- state$frame
  state$frame <- list(call = call)
  on.exit(state$frame <- previous, add = TRUE)
  with_python_errors(fn(with_names_marker(inputs, args, state)), call = call)
}

# Called from Python with the compiled function's arguments (symbolic
# tensors while tracing, see trace.R): f's value.
compiled_forward <- function(state, ..., tracing = FALSE) {
  abort_if_stack_low()
  args <- without_names_marker(list(...), state)
  # Called by the caller's name for it, so that an error in it says `f()`
  # or that name, not customgrad's internals.
  run <- function() {
    as_input(
      call_wrapped(state, args, call = state$frame$call),
      "The value of `f`"
    )
  }
  if (tracing) {
    return(reply_trace_failed_on_error(run_traced(run(), state$f)))
  }
  run()
}
