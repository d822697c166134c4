#' Run an R function as a compiled function
#'
#' `op_compile(f)` returns a function that runs `f` compiled by the active
#' backend: with `tf.function` on TensorFlow and `jax.jit` on JAX. The
#' backend runs the R code of `f` once to trace it, on symbolic tensors, and
#' from then on runs the traced computation: calls with inputs of the same
#' shapes run no R code at all. On PyTorch it compiles nothing, since
#' PyTorch's compiler (`torch.compile`) can't trace through R: the function
#' runs `f` eagerly, R code included, at every call.
#'
#' @section When R runs:
#' On TensorFlow and JAX, `f`'s R code runs only while the backend traces
#' it: at the first call, and again for each new combination of input
#' shapes, dtypes, nesting and argument names. That has consequences:
#'
#' * Side effects in `f` happen at tracing, not at each call: `print()`,
#'   `message()`, counters kept in R variables, writing files.
#' * R values that `f` reads (global variables, R random numbers such as
#'   `runif()`) are fixed into the compiled function when it is traced;
#'   changing them later has no effect. Pass values that change as
#'   arguments (tensors) instead.
#' * While tracing, tensors are symbolic: they have shapes and dtypes but no
#'   values, so `as.array()` and an R `if ()` on a tensor's value don't work;
#'   use tensor ops.
#' * Errors in `f` are raised at tracing (the first call).
#'
#' On PyTorch none of this applies: `f` runs at every call, as `f` itself
#' would, with its inputs converted as on the other backends, so code
#' written for `op_compile()` runs unchanged there, at eager speed.
#' Custom-gradient functions that `f` calls still replay their traces
#' without R (see "When R runs" in [op_custom_gradient()]).
#'
#' Gradients compile too: `op_compile(op_grad(f))` traces `f` and its
#' gradient once. Custom gradients made with [op_custom_gradient()] work
#' inside compiled functions (their R code runs at tracing as well).
#'
#' @param f A function of tensors that returns a tensor or a (nested) list of
#'   tensors.
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
#' traces # 1 on TensorFlow and JAX, 3 on PyTorch
#'
#' # A compiled gradient
#' op_compile(op_grad(f))(c(1, 2))
op_compile <- function(f) {
  label <- rlang::enexpr(f)
  check_function(f)
  state <- new.env(parent = emptyenv())
  state$f <- f
  label_transform(new_transform(f, state, "call_compiled"), label)
}

# The body of every function that op_compile() returns.
call_compiled <- function(state, args, call) {
  inputs <- lapply(seq_along(args), function(i) {
    as_input(args[[i]], argument_label(args, i), call = call)
  })
  names(inputs) <- names(args)
  # Whether the backend has a compiler that can trace R (PyTorch's can't).
  state$eager <- state$eager %||% !autodiff_py()$backend_compiles()
  if (state$eager) {
    return(as_input(
      call_wrapped(state, inputs, call = call),
      "The value of `f`",
      call = call
    ))
  }
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    # Made on first call: defining the function does not start Python.
    py <- autodiff_py()
    callback <- state_callback(state, compiled_forward)
    fn <- state$py <- py$compile_function(callback)
  }
  # Named arguments go to Python by name (the trace is specific to them),
  # in a dict, so that no name clashes with the callable's own arguments.
  named <- nzchar(names(inputs) %||% rep("", length(inputs)))
  kwargs <- if (any(named)) inputs[named]
  # The call, for errors about it raised while Python traces f.
  previous <- state$call
  state$call <- call
  on.exit(state$call <- previous, add = TRUE)
  with_python_errors(
    fn(unname(inputs[!named]), kwargs),
    call = call
  )
}

# Called from Python with the compiled function's arguments.
compiled_forward <- function(state, ...) {
  abort_if_stack_low()
  # Called by the caller's name for it, so that an error in it says `f()`
  # or that name, not customgrad's internals.
  as_input(
    call_wrapped(state, list(...), call = state$call),
    "The value of `f`"
  )
}
