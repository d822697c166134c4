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
#' `f`. `f(...)` must return `tuple(value, grad)` (keras3's [keras3::tuple()],
#' a Python tuple) or `list(value, grad)`:
#'
#' * `value` is a tensor, or an R list (nested lists allowed) of tensors. `h()`
#'   returns it with the same structure.
#' * `grad` computes the gradient with respect to `f`'s inputs from
#'   `upstream`, the gradient with respect to `value` (with `value`'s
#'   structure). It returns, as `tuple()` or `list()`, either one gradient
#'   per tensor input or one per argument the call passed (with `NULL` for
#'   options); a gradient has its input's shape (a nested input gets a
#'   gradient of the same nesting), and `NULL` means "no gradient" (zeros).
#'   With a single tensor input, the gradient may be returned bare. Any
#'   other count is an error of class `customgrad_error_grad_count` that
#'   names both counts.
#'
#' Only the arguments a call passes are inputs: an argument the caller left
#' out is not passed to `f`, which uses its default, and needs no gradient,
#' as with keras3's `op_custom_gradient()`. `f <- function(x, k = 2)` called
#' as `h(x)` has one input; as `h(x, 3)` two (an R double is a tensor).
#'
#' `grad` may be written in any of three styles, on every backend;
#' customgrad reads its arguments and calls it accordingly (as
#' `vignette("custom-gradients")` shows):
#'
#' * `function(upstream)` (any one argument name): called with the upstream
#'   gradient. The form to start with.
#' * `function(..., upstream = NULL)` with `upstream <- upstream %||% ..1`:
#'   the form keras3's own `op_custom_gradient()` documents, for code that
#'   must also run without customgrad (the backends pass the upstream
#'   gradient by name or by position). customgrad passes `f`'s inputs as
#'   `...` and `upstream` by name.
#' * `function(..., upstream)`: PyTorch style, called with `f`'s inputs and
#'   `upstream`.
#'
#' Any of the three may also have an argument `variables` (TensorFlow's
#' convention): when `f` reads TensorFlow variables it did not get as
#' inputs, `grad` is called with `variables = ` those variables and returns
#' `list(input_gradients, variable_gradients)`.
#'
#' Arguments that are R doubles (numbers, vectors, arrays) become tensors
#' through keras3's [keras3::op_convert_to_tensor()], with the dtype keras3
#' gives an R vector of doubles (`float64` on TensorFlow and PyTorch,
#' `float32` on JAX) for every R double, numbers included, so that the
#' inputs of one call agree (keras3 alone makes an R number `float32`, and
#' TensorFlow refuses to mix `float32` and `float64`). R integer and logical
#' vectors and arrays become `int32` and `bool` tensors. For another dtype,
#' pass a tensor: `h(op_convert_to_tensor(x, "float32"))`. Lists are nested
#' inputs, element by element.
#'
#' Other arguments are options, as keras3's functions take them: `NULL`,
#' strings, a single integer or logical (`axis = 2L`, `keepdims = TRUE`),
#' functions. They reach `f` unchanged, get no gradient (`grad` skips them
#' or returns `NULL` for them), and each value is traced on its own (see
#' "When R runs"). An R vector of length 0 is a tensor of shape (0), as
#' keras3 makes it. Anything else is an error of class
#' `customgrad_error_input` naming the argument: complex numbers, factors,
#' data frames (convert them with `as.matrix()`), and lists that mix numbers
#' with options. [op_grad()], [op_compile()] and [gradcheck()] convert
#' their arguments by the same rules and with the same errors (they take
#' no options; [op_grad()] takes R integers as numbers). An R `NA` (in an
#' argument, or in arithmetic with a tensor inside `f` or `grad`) is an error
#' of class `customgrad_error_na`: a tensor has no `NA`, and reticulate
#' would turn a logical `NA` into `TRUE`; `NaN` passes. A gradient that is
#' not floating point (`NA`, a string, a logical, an integer or a complex
#' number) is an error of class `customgrad_error_grad_dtype`, never cast. A
#' floating-point gradient of another floating dtype (`float64` for a
#' `float32` input) is cast to its input's dtype, as PyTorch's autograd
#' does, on every backend and route (`op_grad()`, `tape$gradient()`,
#' `jax$grad()`, `$backward()`), and so is a gradient for a TensorFlow
#' variable, to the variable's.
#'
#' Inside `f` and `grad`, use keras3's `op_*()` functions and R arithmetic
#' on tensors.
#'
#' @section When R runs:
#' By default (`trace = TRUE`) R runs `f` and `grad` once per *input
#' signature*, and never again for calls with that signature: customgrad
#' calls them on Keras symbolic tensors, records the Keras operations they
#' perform (keras3's `op_*()`, R arithmetic and math on tensors, operations
#' on tensors and Keras variables the closure captured) and from then on
#' runs that recording in Python, on every backend, eagerly and inside
#' `tf.function`, `jax$jit()` and `model$fit()`. The signature is the
#' nesting of the inputs and, for each input tensor, its shape and dtype
#' (eager and symbolic tensors alike: a trace made for one serves the
#' other), the values of the arguments that are not tensors, and Keras'
#' float type (`config_floatx()`). Whether a backward pass follows is not
#' part of it: `grad` is traced with `f`, so one trace serves calls with
#' and without gradients. The semantics are those of `jax$jit()` and of
#' [op_compile()], on every backend:
#'
#' * R side effects (`cat()`, counters, files) happen while tracing, not at
#'   every call.
#' * R values that `f` or `grad` read from outside their arguments (global
#'   variables, also read as `get("w")`, options read as `getOption("x")`,
#'   `.GlobalEnv$n`, the fields of R environments such as `cfg$lr`, and
#'   those read by R functions they call, also from a list as
#'   `fns$h(x)`) are fixed in the trace. Called from R,
#'   the function checks before each call that they are still the values
#'   it was traced with; once one has changed, R runs `f` at every call,
#'   after a message of class `customgrad_message_fallback` (with
#'   `trace = "strict"`, an error of class `customgrad_error_trace`). Pass
#'   values that change as arguments. Called from Python (`model$fit()`,
#'   `tf.function`, `jax$jit()`), the values stay fixed. Not checked: the
#'   variables `f` itself assigns with `<<-` and only updates (its own
#'   counter, `n <<- n + 1`), the contents of Python objects (a Python dict
#'   changed in place), active bindings, and values looked up by a name
#'   computed when `f` runs (`get(name)`, `mget()`, `eval()`).
#' * `f` that reads what a trace would fix and no check can see is not
#'   traced (R runs it at every call, below): a variable it assigns with
#'   `<<-` and also reads (`step <<- step + 1; lr <- step / 10`), the clock
#'   (`Sys.time()`, `proc.time()`), an environment variable
#'   (`Sys.getenv()`), a file (`readLines()`, `readRDS()`), and keras3's
#'   `op_is_tensor()`, which is `FALSE` for the symbolic tensors R traces
#'   with. So is `f` that passes an R function to an op (`op_cond()`,
#'   `op_map()`, `op_scan()`, `op_fori_loop()`): a replay would run it in
#'   R; and a function made inside a traced one that reads that one's
#'   tensors (a rule using the outer function's input).
#' * Keras variables that `f` captures and uses in operations on traced
#'   tensors (`op_multiply(x, v)`) are read at every call. A variable's value
#'   used on no traced tensor (`op_exp(v)`, `as.array(v)`) would be computed
#'   once, while tracing: such an `f` can't be traced (below).
#' * `f` or `grad` that reads a tensor's value in R (`as.numeric()`,
#'   `as.array()`, `print()`, an `if ()` on a tensor), draws R random
#'   numbers or Keras random numbers on a shape alone
#'   (`random_uniform(op_shape(x))`; a layer that draws from its input,
#'   such as `layer_dropout()`, is traced), or calls something that Keras
#'   can't record, can't be traced.
#'   For that signature R then runs `f` at every call and `grad` at every
#'   backward pass, as with `trace = FALSE`; a message of class
#'   `customgrad_message_fallback` says so, once per function. With
#'   `trace = "strict"` such a function is an error of class
#'   `customgrad_error_trace` instead.
#' * A function that is traced again and again (a new input shape at every
#'   call) keeps only the latest 32 traces (option `customgrad.max_traces`)
#'   and warns once, with class `customgrad_warning_retrace`.
#' * Errors in `f` or `grad` are raised at the trace, the first call of a
#'   signature.
#'
#' With `trace = FALSE`, R runs `f` at every call and `grad` at every
#' backward pass, on the backend's tensors. JAX then runs `grad` during the
#' forward pass under `jax$grad()`, on tracers; inside `tf.function` or
#' `jax$jit()`, R runs only while those trace (with `value_like`, at every
#' call: see below). On PyTorch, `f` runs with
#' autograd recording when the call is recorded, so that `grad` can be
#' differentiated again (`create_graph = TRUE`) without running `f` again.
#' Called inside a function `g` that [op_grad()], [op_value_and_grad()]
#' or [op_compile()] traces, it is part of `g`'s trace on TensorFlow and
#' JAX, as inside `tf.function`: R runs it while `g` traces (the same
#' numbers; what it reads that a trace would fix, such as R's random
#' numbers, makes `g` fall back to R), and on PyTorch at every call.
#' `op_grad(g, trace = FALSE)` runs it at every call on every backend.
#'
#' R can't run on other threads: a call that needs R from a non-main thread
#' (a `tf.data` map, `tf.py_function`) is an error of class
#' `customgrad_error_thread`. A traced signature needs no R.
#'
#' An interrupt (Ctrl-C, Esc) that comes while a backend has R run `f` or
#' `grad` waits until they return, then stops the call that reached the
#' backend; a time limit (`setTimeLimit()`) that passes then is taken at
#' R's next check. R can't stop safely in the middle of reticulate's own
#' code, which `op_*()` calls run. R code there that runs longer than half
#' a second is stopped at once, as usual.
#'
#' In a model, make it a layer with [layer_custom_gradient()]: R stays
#' out of the training loop, and the layer saves and reloads with the model.
#' Not `layer_lambda(log1pexp)`: Keras can't reload a `Lambda` layer holding
#' a function made in R, so [keras3::save_model()] refuses such a model with
#' an error of class `customgrad_error_not_serializable` (and
#' `layer_lambda(\(x) log1pexp(x))` also calls the R closure at every step
#' on PyTorch).
#'
#' @section R's own numerics inside compiled computations:
#' A function that reads its inputs' values in R (`besselK(as.array(x),
#' nu)`, `pnorm(log.p = TRUE)`, `integrate()`, a package's C code) makes
#' code the backend can't differentiate, or can't run, a differentiable op.
#' Eagerly R gets the backend's tensors at every call. Inside a computation
#' the backend compiles ([op_compile()], `jax$jit()`, `jax$grad()`,
#' `jax$vmap()`, Keras' training step on JAX) there are no values to read,
#' so R runs in the backend's host callback instead: `jax.pure_callback()`
#' under the custom gradient on JAX, `tf.numpy_function()` under
#' `tf.custom_gradient()` on TensorFlow; PyTorch runs eagerly and needs
#' none. `f` then gets the values as tensors, and `grad` the upstream
#' gradient, at every call, on R's main thread.
#'
#' The backend must know the shape and dtype of the value before R runs:
#' `value_like` gives them, as the name of the input the value is shaped
#' like (`value_like = "x"`), or as a function of `f`'s inputs that returns
#' a tensor (or a list of them) shaped like the value, called on symbolic
#' tensors (`value_like = \(x) op_sum(x)` for a scalar). Where it is needed
#' and missing the call is an error of class `customgrad_error_value_like`,
#' and so is a value R returns with another shape (a floating value of
#' another floating dtype is cast). Such a function is best made with
#' `trace = FALSE`: R runs it at every call anyway, and no message says so.
#'
#' Inside a compiled computation an error in `f` or `grad` stops it, as
#' an error of class `customgrad_error_f` or `customgrad_error_grad` that
#' keeps the error's own classes. JAX may run a host callback again or
#' skip one whose value is unused, so `f` should not count calls; under
#' `jax$vmap()` and [keras3::op_vectorized_map()] R runs once per element.
#' On a GPU every call copies its inputs to the host and back.
#'
#' TensorFlow runs a graph's host callbacks on threads of its own, while
#' the thread that called the graph waits, and R runs only on the main
#' thread: customgrad runs the graphs it makes ([op_compile()], the
#' compiled gradients of [op_grad()]) on a thread of their own while R's
#' main thread serves the callbacks, and so Keras' compiled `fit()`,
#' `evaluate()` and `predict()` of a model passed to [serve_host_ops()]
#' (which [layer_custom_gradient()] calls on a Sequential model). A graph
#' that customgrad does not run (a `tf$function()` of yours, a model not
#' served) can't reach R, and is refused when it is traced, with an error
#' of class `customgrad_error_thread` that says what to do; so is a graph
#' XLA compiles (`jit_compile = TRUE`). A host callback is not saved in a
#' SavedModel, and runs only in the process that made it.
#'
#' @section Recursion:
#' `f` and `grad` may call the function itself (or another custom-gradient
#' function that calls it), traced or not, also in [op_compile()] and
#' `fit()`: the values and gradients are those R gives when it runs every
#' call. While tracing, a call of the function inside its own `f` or `grad`
#' is traced anew with the R state of that moment (a depth counter, say)
#' and replayed as the trace made for it; such traces are not kept for
#' other calls. A `grad` that calls the function on `f`'s inputs (with the
#' signature being traced) is that very trace: the gradient of
#' `exp` written as `function(upstream) upstream * selfexp(x)` is
#' differentiable again, one level deeper for each order. A `grad` that
#' calls the function on new shapes at every level would be traced without
#' end (`grad` is traced with `f`): that signature falls back to R at every
#' call, with the message of class `customgrad_message_fallback`, and R
#' runs the calls only as deep as the gradients taken.
#'
#' Recursion without end (through custom-gradient functions, [op_grad()] or
#' [op_compile()]) stops with an error of class
#' `customgrad_error_recursion` while half of R's C stack is still free
#' (each level runs R, reticulate and Python, 0.4-0.6 MB of stack: with
#' the usual 8 MB, about 6 levels fit while tracing and 9 untraced), or
#' past 64 nested levels, or, where R can't measure its stack (`ulimit -s
#' unlimited`), while a quarter of Python's recursion limit is left; the
#' session goes on.
#'
#' @section Errors:
#' An error that the backend raises while `f` or `grad` runs (an `op_*()`
#' call given a string, say) is an error of class `customgrad_error_f` or
#' `customgrad_error_grad` whose message lists the arguments `f` got, with
#' the backend's error as its parent; it keeps the backend's Python classes
#' (`python.builtin.ValueError`, ...), so `tryCatch()` on them still works.
#' Any other error in `f` or `grad` reaches the caller of `h()` as the
#' original condition; if a backend's own function called `h()` (such as
#' `tape$gradient()`, or Keras in `fit()`), its message is kept, and so are
#' the classes of an error raised with `rlang::abort(class = )`. While
#' tracing, such a classed error is raised at once; a plain `stop()` there
#' is taken for something tracing can't hold (see "When R runs"), and the
#' call that runs `f` in R then raises it. Warnings stay warnings. Results
#' that would otherwise fail deep inside the backend (a wrong number of
#' gradients, a gradient of the wrong shape) are caught first, as errors
#' inheriting `customgrad_error`; [customgrad_errors] lists each class.
#'
#' @section keras3's `op_custom_gradient()`:
#' keras3 exports a function of the same name with the same contract, which
#' hands `f` to `keras.ops.custom_gradient` as it is. customgrad's masks it
#' (`library(customgrad)` attaches keras3 first) and adds: `grad` written in
#' any of the styles above works on every backend (keras3's needs
#' `grad(upstream)` on TensorFlow and JAX and `grad(..., upstream)` on
#' PyTorch); several outputs on PyTorch; errors in `f` raised on PyTorch
#' instead of turned into NaN gradients; and classed errors for results the
#' backends would reject. `keras3::op_custom_gradient()` still calls keras3's.
#'
#' @param f A function of tensors returning `tuple(value, grad)`.
#' @param trace `TRUE` (the default) to run `f` and `grad` in R once per
#'   input signature and replay them in Python after that; `FALSE` to run
#'   them in R at every call; `"strict"` to trace and make a function that
#'   can't be traced an error. See "When R runs".
#' @param value_like Where R runs `f` inside a compiled computation (see
#'   "R's own numerics inside compiled computations"), the shape and dtype
#'   of its value: the name of the input it is shaped like, or a function
#'   of `f`'s inputs that returns a tensor shaped like it. `NULL` (the
#'   default): not given, which only a function that R can't trace and
#'   calls inside a compiled computation needs.
#' @returns A function with the arguments of `f` that returns `f`'s value
#'   and is differentiated with `grad`.
#' @seealso [gradcheck()] to test a gradient rule against finite
#'   differences (`error = TRUE` in tests), [op_grad()] to take gradients
#'   with the same code on every backend; [keras3::tuple()], [`%||%`];
#'   `vignette("custom-gradients")`, `vignette("gradients")`.
#' @export
#' @examplesIf customgrad::backend_available()
#' # log(1 + exp(x)), with a value and a gradient that are finite for every
#' # x; the naive formula's gradient is NaN past x = 88 in float32
#' # (vignette("from-zero") tells why).
#' log1pexp <- op_custom_gradient(\(x) {
#'   grad <- function(upstream) upstream / (1 + op_exp(-x))
#'   tuple(op_relu(x) + op_log1p(op_exp(-op_abs(x))), grad)
#' })
#' log1pexp(2)
#'
#' # The gradient with the backend's own autodiff:
#' if (config_backend() == "tensorflow") {
#'   library(tensorflow)
#'   tf <- tensorflow::tf
#'   x <- op_convert_to_tensor(100.0)
#'   with(tf$GradientTape() %as% tape, {
#'     tape$watch(x)
#'     y <- log1pexp(x)
#'   })
#'   dy_dx <- tape$gradient(y, x)
#'   stopifnot(as.numeric(dy_dx) == 1)
#' }
#' if (config_backend() == "jax") {
#'   jax <- reticulate::import("jax")
#'   print(jax$grad(log1pexp)(100))
#'   print(jax$jit(jax$grad(log1pexp))(100)) # R runs only while tracing
#' }
#' if (config_backend() == "torch") {
#'   torch <- reticulate::import("torch")
#'   x <- torch$tensor(100, requires_grad = TRUE)
#'   log1pexp(x)$backward()
#'   print(x$grad)
#' }
#'
#' # The backend-agnostic form: check the rule against finite differences,
#' # and take the gradient, with the same code on every backend.
#' gradcheck(log1pexp, c(-3, 0, 2.5))
#' stopifnot(as.numeric(op_grad(log1pexp)(100)) == 1)
#'
#' # A default and an option: only the arguments passed are inputs, and
#' # grad returns one gradient per tensor input ...
#' scale_by <- op_custom_gradient(function(x, k = 2, axis = NULL) {
#'   tuple(op_sum(x * k, axis = axis), function(upstream) {
#'     op_expand_dims(upstream, axis) * op_ones_like(x) * k
#'   })
#' })
#' op_grad(function(x) op_sum(scale_by(x, axis = 2L)))(matrix(1:4, 2) + 0)
#' # ... or one per argument passed, NULL for the options.
#' row_sums <- op_custom_gradient(function(x, axis) {
#'   tuple(op_sum(x, axis = axis), function(upstream) {
#'     list(op_expand_dims(upstream, axis) * op_ones_like(x), NULL)
#'   })
#' })
#' op_grad(function(x) op_sum(row_sums(x, 2L)))(matrix(1:4, 2) + 0)
#'
#' # Two inputs, two outputs: upstream has the value's structure, and grad
#' # returns one gradient per input.
#' sum_and_product <- op_custom_gradient(function(x, y) {
#'   grad <- function(upstream) {
#'     list(
#'       upstream[[1]] + upstream[[2]] * y,
#'       upstream[[1]] + upstream[[2]] * x
#'     )
#'   }
#'   list(list(x + y, x * y), grad)
#' })
#' sum_and_product(2, 3)
#'
#' # R's own numerics as a differentiable op: besselK() and its derivative,
#' # in R at every call, also inside op_compile() (a host callback).
#' bessel_k <- op_custom_gradient(trace = FALSE, value_like = "x", \(x) {
#'   xv <- as.array(x)
#'   dk <- -(besselK(xv, 0.5) + besselK(xv, 2.5)) / 2
#'   tuple(
#'     op_convert_to_tensor(besselK(xv, 1.5), op_dtype(x)),
#'     \(upstream) upstream * op_convert_to_tensor(dk, op_dtype(x))
#'   )
#' })
#' op_compile(op_grad(\(x) op_sum(bessel_k(x))))(c(0.5, 1, 2))
#'
#' # A gradient written with the function itself is differentiable again:
#' # every derivative of exp is exp.
#' selfexp <- op_custom_gradient(function(x) {
#'   tuple(op_exp(x), function(upstream) upstream * selfexp(x))
#' })
#' op_grad(op_grad(selfexp))(1)
op_custom_gradient <- function(f, trace = TRUE, value_like = NULL) {
  label <- rlang::as_label(rlang::enexpr(f))
  check_function(f)
  trace <- check_flag(trace, strict = TRUE)
  check_value_like(value_like, names(formals(args(f))))
  state <- new.env(parent = emptyenv())
  state$f <- f
  state$value_like <- value_like
  state$label <- label
  state$trace <- trace
  state$statics <- new.env(parent = emptyenv()) # non-tensor arguments
  fmls <- formals(args(f)) %||% alist(... = )
  state$arg_names <- names(fmls)
  body <- custom_gradient_body(lapply(names(fmls), as.symbol))
  env <- rlang::env(ns_env(), .customgrad_state = state)
  h <- rlang::new_function(fmls, body, env)
  class(h) <- c("customgrad_function", "function")
  # R's JIT never compiles a function this short made in its own
  # environment; interpreted, its body costs ~8 us more at every call.
  # Compiling takes ~4 ms, once.
  compiler::cmpfun(h)
}

#' @export
print.customgrad_function <- function(x, ...) {
  state <- environment(x)$.customgrad_state
  cat_function_header("custom-gradient function", x)
  cat("  f: ", state$label, "\n", sep = "")
  tracing <- switch(
    as.character(state$trace),
    "TRUE" = "once per input signature, then replayed in Python",
    "FALSE" = "off: R runs f and grad at every call",
    strict = "strict: once per input signature; an error if f can't be traced"
  )
  cat("  tracing: ", tracing, "\n", sep = "")
  # Read only when Python runs it already: printing never starts Python.
  py <- state$py
  if (
    !isFALSE(state$trace) && !is.null(py) && !reticulate::py_is_null_xptr(py)
  ) {
    n <- reticulate::py_to_r(py$core$n_cached)
    cat("  traces kept: ", n, "\n", sep = "")
  }
  invisible(x)
}

# Handed to Python (jax$grad(h), tf$`function`(h), a Keras Lambda layer), a
# custom-gradient function is its Python callable: no R in between.
#' @rawNamespace S3method(reticulate::r_to_py, customgrad_function)
r_to_py.customgrad_function <- function(x, convert = FALSE) {
  state <- environment(x)$.customgrad_state
  fn <- custom_gradient_callable(state)
  # The callable holds R's side weakly (state_callback()); a copy that
  # Python keeps holds it strongly, as long as Python keeps the copy.
  owner <- rlang::new_function(list(), NULL, env = state)
  customgrad_py()$held_by_python(fn, owner)
}

ns_env <- function() asNamespace("customgrad")

# The body of a function that op_custom_gradient() returns: the call of
# its Python callable written out with f's arguments (each a tensor or a
# nest of them), the fewest R steps per call.
custom_gradient_body <- function(inputs) {
  if (any(vapply(inputs, identical, TRUE, quote(...)))) {
    return(rlang::expr(call_custom_gradient(
      .customgrad_state,
      list(!!!inputs)
    )))
  }
  # An argument the call did not pass keeps its place, and f its default.
  args <- lapply(inputs, function(x) {
    rlang::expr(
      if (missing(!!x)) {
        missing_input()
      } else {
        as_input(
          !!x,
          !!paste0("Argument `", x, "`"),
          call = sys.call(),
          state = .customgrad_state
        )
      }
    )
  })
  rlang::expr({
    fn <- .customgrad_state$py_from_r
    if (!identical(.customgrad_state$session, the$session)) {
      fn <- custom_gradient_entry(.customgrad_state, sys.call())
    }
    if (!is.null(.customgrad_state$captured)) {
      watch_custom_gradient_captures(.customgrad_state, sys.call())
    }
    as_r_result(reticulate::py_call(fn, !!!args), call = sys.call())
  })
}

# The same for an f with `...`; `call` is the caller's call, named in
# errors.
call_custom_gradient <- function(state, inputs, call = sys.call(-1)) {
  fn <- state$py_from_r
  if (!identical(state$session, the$session)) {
    fn <- custom_gradient_entry(state, call)
  }
  if (!is.null(state$captured)) {
    watch_custom_gradient_captures(state, call)
  }
  labels <- names(inputs) %||% character(length(inputs))
  labels[!nzchar(labels)] <- paste0("..", which(!nzchar(labels)))
  args <- lapply(seq_along(inputs), function(i) {
    what <- paste0("Argument `", labels[[i]], "`")
    as_input(inputs[[i]], what, call = call, state = state)
  })
  as_r_result(do.call(reticulate::py_call, c(list(fn), args)), call = call)
}

# A result as keras3 hands it out: several outputs as an R list (nested
# like f's value); a tensor as py_call() returned it, with conversion
# already on (py_to_r() on it would cost ~15 us to change nothing). An
# error comes back as a value (errors.Raised, which saves every call a
# condition handler) and is raised here, as customgrad's errors are.
as_r_result <- function(out, call) {
  if (inherits(out, r_result_classes)) {
    if (inherits(out, "customgrad.errors.Raised")) {
      with_python_errors(reticulate::py_call(out$again), call = call)
    }
    return(reticulate::py_to_r(out))
  }
  out
}

r_result_classes <- c(
  "python.builtin.list",
  "python.builtin.dict",
  "customgrad.errors.Raised"
)

# R's entry into the Python callable (made on first use; made again in
# another R session, a restored workspace, where the old one is a null
# pointer: its session token is not this session's). It also keeps the
# memory R holds bounded (python.R). py_call() calls it as it is, without
# reticulate's R function around it, which costs more; results are
# converted as keras3 hands them out.
custom_gradient_entry <- function(state, call) {
  custom_gradient_callable(state, call)
  state$session <- the$session
  state$py_from_r
}

# The Python callable behind a custom-gradient function, made on first use:
# defining one does not start Python.
custom_gradient_callable <- function(state, call = rlang::caller_env()) {
  fn <- state$py
  if (is.null(fn) || reticulate::py_is_null_xptr(fn)) {
    py <- customgrad_py(call = call)
    callbacks <- trace_callbacks(
      custom_gradient_name(state, call),
      "op_custom_gradient"
    )
    fn <- state$py <- py$custom_gradient(
      state_callback(state, custom_gradient_forward),
      trace = !isFALSE(state$trace),
      strict = identical(state$trace, "strict"),
      notify = callbacks$notify,
      warn_retrace = callbacks$warn_retrace,
      max_traces = max_traces(call),
      value_like = if (!is.null(state$value_like)) {
        state_callback(state, host_value_like)
      }
    )
    # R's own calls also keep the memory R holds bounded (python.R).
    state$py_from_r <- reticulate::py_get_attr(fn, "from_r")
    if (!isFALSE(state$trace)) {
      state$captured <- captured_bindings(state$f)
    }
  }
  fn
}

# Before a call from R: R runs f at every call once a value it read from
# outside changed (captures.R).
watch_custom_gradient_captures <- function(state, call) {
  watch_captures(
    state,
    reticulate::py_get_attr(state$py, "core"),
    custom_gradient_name(state, call),
    "op_custom_gradient",
    call
  )
}

# How messages name a custom-gradient function: as the user's first call
# named it (`log1pexp()`), or by its definition when it has no name there
# (handed to Python, or called as an expression).
custom_gradient_name <- function(state, call) {
  head <- if (rlang::is_call(call)) call[[1]]
  if (rlang::is_symbol(head) || rlang::is_call(head, c("$", "::", ":::"))) {
    return(sprintf("`%s()`", rlang::expr_deparse(head)))
  }
  sprintf("`op_custom_gradient(%s)`", state$label)
}

# Called from Python with f's inputs: run f, check its result, and return
# the value and the handle of grad's R callback (see run_grad()).
# `released` are handles Python no longer needs. `tracing`: the inputs are
# Keras symbolic tensors, and f and grad are being traced (see trace.R).
# `host`: R runs in a host callback inside a compiled computation (_host.py),
# where any error of f or grad stops the computation as customgrad_error_f
# or customgrad_error_grad, keeping its own classes.
custom_gradient_forward <- function(
  state,
  ...,
  released = NULL,
  tracing = FALSE,
  host = FALSE
) {
  release_grads(released)
  abort_if_stack_low()
  f <- state$f
  inputs <- passed_inputs(restore_statics(list(...), state$statics), state)
  # grad gets the inputs by position, whatever it names them.
  grad_inputs <- unname(inputs)
  if (tracing) {
    return(reply_trace_failed_on_error({
      result <- as_f_result(run_traced(do.call(f, inputs), f))
      convention <- grad_convention(result[[2]])
      check_traceable_grad(convention, call = NULL)
      callback <- grad_callback(result[[2]], convention, grad_inputs)
      forward_reply(
        result[[1]],
        register_grad(traced_callback(callback), once = TRUE)
      )
    }))
  }
  result <- as_f_result(call_with_backend_errors(f, inputs, "f", host = host))
  grad <- result[[2]]
  callback <- grad_callback(
    grad,
    grad_convention(grad),
    grad_inputs,
    inputs,
    host = host
  )
  forward_reply(value = result[[1]], grad = register_grad(callback))
}

# f's result as an R list of value and grad. keras3's tuple() is
# reticulate's: a Python tuple, whose grad is a Python wrapper of the R
# function; that function, formals and all, is taken back out of it
# (reticulate-internals.R).
as_f_result <- function(result, call = NULL) {
  if (inherits(result, "python.builtin.tuple")) {
    result <- f_result_parts(result)
  }
  check_custom_gradient_result(result, call = call)
}


# grad callbacks wait here, by handle, for Python's backward pass: one R
# callback (run_grad) serves them all, so a forward call does not make a
# new Python callable.
# `once`: run once, then dropped (grad while tracing: the trace's program
# replaces it, and Python's release of it comes only at the next forward
# that runs R, which a traced function may never make again).
register_grad <- function(fn, once = FALSE) {
  handle <- the$grad_handle <- the$grad_handle + 1
  if (once) {
    run <- fn
    fn <- function(...) {
      on.exit(utils::remhash(the$grads, handle))
      run(...)
    }
  }
  utils::sethash(the$grads, handle, fn)
  handle
}

release_grads <- function(released) {
  # Handles come back from Python as integers; they are kept as doubles.
  for (handle in as.double(unlist(released))) {
    utils::remhash(the$grads, handle)
  }
}

run_grad <- function(handle, upstream, variables = NULL) {
  abort_if_stack_low()
  fn <- utils::gethash(the$grads, as.double(handle))
  fn(upstream, variables)
}

# How grad wants to be called, read from its formals. A Python callable
# (not reticulate's wrapper of an R function) is called grad(upstream).
grad_convention <- function(grad, call = NULL) {
  if (reticulate::is_py_object(grad)) {
    return(list(inputs = FALSE, named = FALSE, variables = FALSE))
  }
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

# `f_args`: f's arguments by name, for the error of a backend's failure in
# grad (NULL while tracing, where a failure is a failed trace).
grad_callback <- function(
  grad,
  convention,
  inputs,
  f_args = NULL,
  host = FALSE
) {
  # Forced here: a promise would keep the caller's frame, f's value with
  # it, alive as long as this callback waits for Python's release.
  force(grad)
  force(convention)
  force(inputs)
  force(f_args)
  force(host)
  function(upstream, variables = NULL) {
    args <- grad_args(convention, inputs, upstream)
    if (!is.null(variables)) {
      if (!convention$variables) {
        abort_grad_variables(length(variables))
      }
      args$variables <- variables
    }
    if (is.null(f_args)) {
      return(do.call(grad, args))
    }
    call_with_backend_errors(grad, args, "grad", f_args, host = host)
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
