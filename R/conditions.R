# Conditions: customgrad's own errors, and R conditions that come back
# through Python. Every error class is listed once, in `error_classes`; the
# table in ?customgrad_errors is made from it.

#' Errors customgrad signals
#'
#' Every error customgrad signals has the class `customgrad_error` and one
#' more specific class from the table below, so that code can catch one
#' kind with `tryCatch(..., customgrad_error_grad_shape = function(e) ...)`
#' or test for it with `testthat::expect_error(class = )`. The message says
#' what went wrong (`x`) and what to do (`i`), and names the call that
#' failed. Errors raised by your own `f` or `grad` (`stop()`,
#' `rlang::abort()`) come back with their own classes, unchanged.
#'
#' @eval rd_error_table()
#' @name customgrad_errors
#' @aliases customgrad-errors
#' @keywords internal
#' @examplesIf customgrad::backend_available()
#' library(keras3)
#' h <- op_custom_gradient(function(x) {
#'   tuple(x * 2, function(upstream) list(upstream, upstream))
#' })
#' err <- tryCatch(op_grad(h)(1), customgrad_error = function(e) e)
#' class(err)
#' err
NULL

# class (without the `customgrad_error_` prefix) = when it is signalled.
error_classes <- c(
  not_function = "An argument that must be a function is not one.",
  f_result = "`f` returned something other than `tuple(value, grad)`.",
  grad_not_function = "The second element of `f`'s result is not a function.",
  grad_signature = "The gradient function takes no argument for the upstream gradient.",
  grad_count = "The gradient function returned more or fewer gradients than `f` has inputs.",
  grad_shape = "A gradient's shape differs from its input's.",
  grad_structure = "A gradient is nested unlike its input, or a non-tensor input got a gradient.",
  grad_variables = "`f` read TensorFlow variables that the gradient function does not account for.",
  input = "An input can't be passed to a custom-gradient, gradient or compiled function.",
  na = "An R value with `NA` reached a tensor (an argument, or an operand of arithmetic): tensors have no `NA`.",
  grad_dtype = "The gradient function returned a gradient that is not floating point (a string, a logical, an integer, a complex number).",
  trace_arg = "`trace` is not `TRUE`, `FALSE` or `\"strict\"`.",
  trace = "A function with `trace = \"strict\"` could not be traced.",
  trace_read = "Tracing met something a trace can't hold (a value read in R, R's random numbers). It never reaches you: the function falls back to R at every call, with a message giving this reason.",
  symbolic_tensor = "A symbolic tensor's values were read in R outside tracing.",
  unsupported_op = "An R math function has no `keras.ops` equivalent for tensors.",
  wrt = "`wrt` names arguments that are not there.",
  wrt_dtype = "A gradient was asked for with respect to a tensor that is not floating point.",
  not_scalar = "`op_grad()` got a non-scalar value without an `upstream`.",
  upstream = "`upstream` does not match `f`'s value in nesting or shape.",
  gradcheck = "`gradcheck(error = TRUE)` found a gradient that disagrees with finite differences.",
  gradcheck_input = "`gradcheck()` has no numeric input to check.",
  gradcheck_structure = "`f` returned a different number of tensors for the perturbed inputs of `gradcheck()`.",
  bad_argument = "A tolerance or flag argument has a wrong value.",
  option = "A customgrad option (`customgrad.max_traces`) has a wrong value.",
  backend_unknown = "A backend name other than \"tensorflow\", \"jax\" or \"torch\".",
  backend_started = "Keras already runs with another backend than the one chosen.",
  backend_unsupported = "Keras runs with a backend customgrad does not support.",
  backend_missing = "The Python in use lacks the backend's module.",
  python_missing = "No Python with Keras 3 is chosen or found, and none could be provisioned.",
  python_version = "The Python in use, or its Keras, is older than customgrad needs (Python 3.11, Keras 3.14).",
  load_function = "A loaded custom-gradient layer can't find its function, and its saved traces don't serve the call.",
  not_serializable = "`save_model()` met a custom-gradient function where Keras would save it by a name that loading can't find: in a `Lambda` layer made with `layer_lambda()`, or as an activation.",
  load_format = "A loaded custom-gradient layer would run on its saved traces, and they have a format this customgrad doesn't read: saved by a newer customgrad, or by an older one than it still reads.",
  thread = "A custom-gradient function was called from a Python thread other than the main one, where R can't run.",
  value_like = "A custom-gradient function that R runs in a host callback (inside a compiled computation) has no `value_like` to give its value's shape and dtype, or R's value is not shaped as `value_like` says.",
  distributed = "`use_distributed()` was asked for what the backend can't do (several processes on TensorFlow or PyTorch, devices on PyTorch).",
  distributed_started = "`use_distributed()` was called after the backend started, when processes and devices can no longer be arranged.",
  f = "The backend raised an error while `f` ran (wrong input types, say); the backend's error is the parent, and its Python classes stay among the error's.",
  grad = "The backend raised an error while the gradient function ran; the backend's error is the parent, and its Python classes stay among the error's.",
  recursion = "Custom-gradient functions called each other (or themselves) so deep that R's C stack would run out: unbounded recursion.",
  transform = "A transform can't honour a custom gradient: forward mode (a Jacobian-vector product), TensorFlow's `vectorized_map()`, or batching a function that R runs at every call.",
  internal = "R and Python disagreed about a message between them: a bug in customgrad, please report it."
)

rd_error_table <- function() {
  rows <- paste0(
    "\\code{customgrad_error_",
    names(error_classes),
    "} \\tab ",
    gsub("`([^`]*)`", "\\\\code{\\1}", error_classes),
    " \\cr"
  )
  c(
    "@section Error classes:",
    "\\tabular{ll}{",
    "\\strong{Class} \\tab \\strong{When} \\cr",
    rows,
    "}"
  )
}

abort_customgrad <- function(
  message,
  class,
  ...,
  call = rlang::caller_env(),
  parent = NULL,
  .envir = parent.frame()
) {
  if (!class %in% names(error_classes)) {
    rlang::abort(
      paste0("Undeclared customgrad error class: ", class),
      .internal = TRUE
    )
  }
  cli::cli_abort(
    message,
    class = c(paste0("customgrad_error_", class), "customgrad_error"),
    ...,
    call = call,
    parent = parent,
    .envir = .envir
  )
}

# An R function for Python to call. An R error inside it reaches Python as
# an exception that carries the condition (reticulate attaches its class and
# fields), and comes back to R through with_python_errors(). Arguments reach
# it converted to R (Python lists as R lists, None as NULL); tensors stay
# Python objects, with conversion on as keras3 hands them out.
r_callback <- function(fn, convert = TRUE) {
  force(fn)
  reticulate::r_to_py(
    function(...) withCallingHandlers(fn(...), error = note_error),
    convert = convert
  )
}

# An error leaving an R callback, told to Python. One with classes of its
# own: its classes, so that they reach the R caller even through code that
# is not customgrad's (Keras' fit(), a layer's call; see errors.py,
# RConditionError). A time limit: that it must reach the user even through
# code that catches it and calls R again (R's limit fires only once).
note_error <- function(cnd) {
  if (is_time_limit(cnd)) {
    try(import_submodule("errors")$note_stop(), silent = TRUE)
    return()
  }
  classes <- setdiff(class(cnd), generic_condition_classes)
  if (length(classes) > 0L && !reticulate::is_py_object(cnd)) {
    try(import_submodule("errors")$note_r_condition(classes), silent = TRUE)
  }
}

# A customgrad error leaving an R function that Python called (customgrad's
# callbacks, and those keras3 hands to Python: op_map(), layer_lambda()),
# as a Python exception. reticulate's (a RuntimeError carrying the fields)
# reaches R again as python.builtin.RuntimeError wherever the caller is not
# customgrad; remade with the error's classes among its type's, it keeps
# them (errors.carried_r_condition()).
#' @rawNamespace S3method(reticulate::r_to_py, customgrad_error)
r_to_py.customgrad_error <- function(x, convert = FALSE) {
  carried <- NextMethod()
  if (!isTRUE(the$py_ready) || is_python_error(x)) {
    return(carried)
  }
  classes <- setdiff(class(x), generic_condition_classes)
  import_submodule("errors", convert = FALSE)$carried_r_condition(
    carried,
    classes
  )
}

generic_condition_classes <- c(
  "rlang_error",
  "simpleError",
  "error",
  "condition"
)

# Evaluate a call into Python; errors that come back from customgrad's
# Python module become R errors again: the original R condition for one
# raised in an R callback, a classed customgrad error for the module's own
# checks. A calling handler (cheaper than tryCatch() on every call): it
# sees only errors that reach this frame, since an R error inside a Python
# callback is caught by reticulate's own handler, which is established
# later, in the callback; anything not from customgrad goes on as it is.
# `expr` is dropped on exit (rm() would cost 20 us a call): R keeps the
# frame of withCallingHandlers()'s caller reachable after the call, and
# with it the value of `expr` (the tensor R was handed), until the next
# call through here. A collection in that call (customgrad's run there)
# found it alive and promoted it, with the tensors its gradient saved, to
# stay until a level-1 or full one.
with_python_errors <- function(expr, call = rlang::caller_env()) {
  on.exit(expr <- NULL)
  withCallingHandlers(expr, error = function(cnd) {
    # Python's (an R condition given a backend's classes is R's).
    if (
      inherits(cnd, "python.builtin.BaseException") &&
        reticulate::is_py_object(cnd)
    ) {
      rethrow_python_error(cnd, call)
    }
  })
}

rethrow_python_error <- function(cnd, call) {
  if (!isTRUE(the$py_ready)) {
    return(invisible())
  }
  py <- the$py_module
  found <- py$find_error(cnd)
  if (is.null(found)) {
    return(invisible())
  }
  r_class <- reticulate::py_get_attr(found, "r_class")
  if (!inherits(r_class, "python.builtin.str")) {
    # An R condition, carried through Python by reticulate: signal it again.
    # customgrad's own checks in callbacks can't know the user's call; the
    # call that entered Python is it.
    cnd <- structure(
      py$r_condition_fields(found),
      class = reticulate::py_to_r(r_class)
    )
    if (inherits(cnd, "customgrad_error") && is.null(cnd$call)) {
      cnd$call <- if (is.environment(call)) rlang::frame_call(call) else call
    }
    stop(with_backend_classes(cnd))
  }
  class <- sub("^customgrad_error_", "", reticulate::py_to_r(r_class))
  details <- reticulate::py_to_r(reticulate::py_get_attr(found, "details"))
  if (is.null(details)) {
    # Only Keras' re-raised copy, with Keras' message: its R classes come
    # with its Python class (errors.r_class_base()).
    stop(cnd)
  }
  # The Python error is kept as a field, not chained as the parent: its
  # message says the same again, in Python's words.
  abort_customgrad(
    python_error_message(class, details),
    class = class,
    call = call,
    python_error = cnd,
    details = details,
    .envir = rlang::env(d = details)
  )
}

# A customgrad error raised in Python that reached R through code that is
# not customgrad's (keras3's save_model() and load_model(), a model's
# fit()) is the Python exception itself, to which reticulate gives
# customgrad's R classes (errors.r_class_base()). Its message is the one R
# writes for it, and its call is the keras3 or customgrad function the
# user called rather than reticulate's py_call_impl().
#' @export
conditionMessage.customgrad_error <- function(c) {
  cnd <- if (is_python_error(c)) condition_of_python_error(c)
  if (is.null(cnd)) NextMethod() else conditionMessage(cnd)
}

# rlang (and testthat's snapshots) read the message as a header (a method
# of rlang's generic, which lintr takes for a function name).
#' @exportS3Method rlang::cnd_header
cnd_header.customgrad_error <- function(cnd, ...) { # nolint: object_name.
  r_cnd <- if (is_python_error(cnd)) condition_of_python_error(cnd)
  if (is.null(r_cnd)) NextMethod() else conditionMessage(r_cnd)
}

#' @export
conditionCall.customgrad_error <- function(c) {
  if (!is_python_error(c)) {
    return(NextMethod())
  }
  user_call_in_trace(c)
}

# rlang (and testthat's snapshots) read the call as `cnd[["call"]]`, which
# for a Python exception is reticulate's: customgrad's exceptions (a class
# before reticulate's in theirs) give the user's call there too.
# nolint start: object_length_linter, object_name_linter.
#' @export
`[[.customgrad.errors.CustomGradError` <- function(x, i, ...) {
  if (identical(i, "call")) conditionCall.customgrad_error(x) else NextMethod()
}

#' @export
`$.customgrad.errors.CustomGradError` <- function(x, name) {
  x[[name]]
}
# nolint end

is_python_error <- function(cnd) {
  inherits(cnd, "python.builtin.BaseException") &&
    reticulate::is_py_object(cnd)
}

# The R condition that customgrad's own calls signal for the Python
# exception `cnd` (see rethrow_python_error()), or NULL.
condition_of_python_error <- function(cnd) {
  found <- tryCatch(
    {
      rethrow_python_error(cnd, call = NULL)
      NULL
    },
    error = identity
  )
  if (is_python_error(found)) NULL else found
}

# The function the user called, from the R trace that reticulate keeps
# with a Python exception: the first call of a keras3 or customgrad
# function, or else the call that entered Python (`keras$ops$jvp(...)`, a
# Python function called from R, is what called reticulate's first frame).
user_call_in_trace <- function(cnd) {
  trace <- tryCatch(cnd$trace, error = function(e) NULL)
  if (!inherits(trace, "rlang_trace")) {
    return(NULL)
  }
  entry <- which(trace$namespace %in% c("keras3", "customgrad"))
  if (length(entry) > 0L) {
    return(trace$call[[entry[[1]]]])
  }
  into_python <- which(trace$namespace %in% "reticulate")
  caller <- if (length(into_python) > 0L) trace$parent[[into_python[[1]]]]
  if (is.null(caller) || caller == 0L) NULL else trace$call[[caller]]
}

# The message for an error customgrad's Python module raised, from its
# class and details (`d` in the templates).
python_error_message <- function(class, d) {
  switch(
    class,
    grad_count = c(
      if (identical(d$expected, d$tensors)) {
        "The gradient function must return {d$tensors} gradient{?s}, one per tensor input of {.arg f}."
      } else {
        "The gradient function must return {d$tensors} gradient{?s}, one per tensor input of {.arg f}, or {d$expected}, one per argument passed."
      },
      "x" = "It returned {d$returned}.",
      "i" = if (identical(d$expected, d$tensors)) {
        "Return a list with one gradient per input, {.code NULL} for an input without one."
      } else {
        "Return a list with one gradient per tensor input, or one per argument passed with {.code NULL} for options."
      }
    ),
    grad_shape = c(
      "Each gradient must have its input's shape.",
      "x" = "The gradient for {d$where} has shape {d$grad_shape}; the input has shape {d$input_shape}.",
      "i" = "Reduce or broadcast the gradient to the input's shape (with {.fn op_sum} over broadcast axes, say)."
    ),
    grad_structure = if (identical(d$problem, "static")) {
      c(
        "Input {d$input} of {.arg f} is not a tensor, so it has no gradient.",
        "x" = "The gradient function returned one for it.",
        "i" = "Return {.code NULL} in its place."
      )
    } else {
      c(
        "The gradient for input {d$input} must be nested like the input.",
        "x" = "The input holds {d$n_tensors} tensor{?s}, and its gradient is nested otherwise.",
        "i" = "Return a list with the input's nesting and names."
      )
    },
    grad_dtype = c(
      "Each gradient must be floating point, like its input.",
      "x" = "The gradient for {d$where} has dtype {.val {d$dtype}}; the input has dtype {.val {d$input_dtype}}.",
      "i" = "Return a floating-point tensor (R numbers, {.code op_cast(g, \"{d$input_dtype}\")}), or {.code NULL} for no gradient."
    ),
    grad_variables = c(
      "The gradient function must return {d$expected} variable gradient{?s}, one per TensorFlow variable {.arg f} read.",
      "x" = "It returned {d$returned}.",
      "i" = "Return {.code list(input_gradients, variable_gradients)}."
    ),
    load_function = c(
      "The custom-gradient layer {.val {d$layer}} needs its function{d$named}.",
      "x" = "{toupper(substr(d$problem, 1, 1))}{substring(d$problem, 2)}.",
      "i" = if (is.null(d$`function`)) {
        "Assign the function to a variable, make the layer with that variable, and save the model again."
      } else {
        "Pass it to {.fn load_model}: {.code custom_objects = list({d$`function`} = <function>)}, or register it once with {.code register_keras_serializable({d$`function`}, name = \"{d$`function`}\")}."
      }
    ),
    not_serializable = c(
      if (is.null(d$layer)) {
        "Keras can't save the custom-gradient function in this model."
      } else {
        "Keras can't save the custom-gradient function in the {.code Lambda} layer {.val {d$layer}}."
      },
      "x" = "The model would save, but not load: Keras saves the function by a name that {.fn load_model} can't find it by.",
      "i" = if (is.null(d$layer)) {
        "Make a layer of it with {.fn layer_custom_gradient}: it saves and reloads with the model."
      } else {
        "Make the layer with {.fn layer_custom_gradient} instead of {.fn layer_lambda}: it saves and reloads with the model."
      },
      "i" = docs_hint(
        "troubleshooting",
        "A model that won't reload",
        topic = "layer_custom_gradient"
      )
    ),
    load_format = c(
      switch(
        d$reason,
        newer = "The custom-gradient layer {.val {d$layer}} was saved by a newer customgrad.",
        older = "The custom-gradient layer {.val {d$layer}} was saved by an older customgrad.",
        "The custom-gradient layer {.val {d$layer}} has saved traces of an unknown format."
      ),
      "x" = "Its traces have format {.val {d$format}}; this customgrad reads {d$reads}.",
      "i" = paste0(
        switch(
          d$reason,
          newer = "Upgrade customgrad to load it",
          older = "Load it with the customgrad version that saved it",
          "Save the model again where it was made"
        ),
        if (!is.null(d$`function`)) {
          ", or pass its function to {.fn load_model} ({.code custom_objects = list({d$`function`} = <function>)})"
        },
        if (!is.null(d$`function`) && identical(d$reason, "older")) {
          " and save the model again with this customgrad"
        },
        "."
      )
    ),
    thread = if (!is.null(d$host)) {
      c(
        "R can't run a custom-gradient function inside this compiled computation.",
        "x" = if (identical(d$host, "staged")) {
          "TensorFlow would run R's host callback on a thread of its own while R's main thread waits for the graph, and R runs only on the main thread; a graph exported ({.code model$export()}, a SavedModel) can't hold R at all."
        } else if (identical(d$host, "exported")) {
          "It is being exported ({.code model$export()}, {.code jax.export}) to run where R is not, and an exported computation can't call R."
        } else {
          "The backend ran R's host callback on the thread {.val {d$thread}} while R's main thread waited for the computation, and R runs only on the main thread."
        },
        "i" = "Compile with {.fn op_compile} (which serves R while the computation runs) rather than {.code tf$`function`()}; in {.fn fit}, {.fn evaluate} and {.fn predict} on TensorFlow, {.code compile(run_eagerly = TRUE)}, or use the JAX or PyTorch backend.",
        "i" = "A model that computes in R runs only where R does: save it with {.fn save_model} and load it in R, rather than export it."
      )
    } else {
      c(
        "A custom-gradient function was called on the Python thread {.val {d$thread}}.",
        "x" = "R runs only on the main thread.",
        "i" = "Call it eagerly or inside a compiled function traced on the main thread, not from {.code tf.py_function}, a {.code tf.data} map or another thread."
      )
    },
    value_like = switch(
      d$problem,
      missing = c(
        "A custom-gradient function that R runs at every call needs {.arg value_like} inside a compiled computation.",
        "x" = "It could not be traced, and R could not run it on the backend's symbolic tensors: {d$reason}",
        "i" = "With {.arg value_like}, R runs it on the values in a host callback; the backend must know the shape and dtype of its value before R runs.",
        "i" = "Give {.code op_custom_gradient(f, value_like = \"x\")} for a value shaped like input {.arg x}, or a function of the inputs that returns a tensor shaped like the value ({.code value_like = \\(x) op_sum(x)})."
      ),
      not_tensor = c(
        "{.arg value_like} must give tensors shaped like {.arg f}'s value.",
        "x" = "Element {d$leaf} of what it gave is not a tensor."
      ),
      nesting = c(
        "{.arg f}'s value must be nested as {.arg value_like} says.",
        "x" = "{.arg value_like} gives {d$expected} tensor{?s}; {.arg f} returned {d$returned}."
      ),
      shape = c(
        "{.arg f}'s value must have the shape {.arg value_like} gives.",
        "x" = "Tensor {d$leaf} of the value has shape {d$shape}; {.arg value_like} gives {d$declared}.",
        "i" = "Fix {.arg value_like}, or the value's shape."
      ),
      dtype = c(
        "{.arg f}'s value must have the kind of dtype {.arg value_like} gives.",
        "x" = "Tensor {d$leaf} of the value has dtype {.val {d$dtype}}; {.arg value_like} gives {.val {d$declared}}."
      ),
      c(
        "The gradient of an R host op was needed after it was dropped.",
        "x" = "Only the {d$kept} newest forward calls keep their gradient function until their backward pass."
      )
    ),
    recursion = c(
      "Custom-gradient functions can't be nested {d$depth} levels deep.",
      "x" = "The limit is {d$limit} levels: a function that calls itself without end?",
      "i" = "Stop the recursion with a condition that R decides, such as a depth counter."
    ),
    transform = switch(
      d$kind,
      forward = c(
        "A custom gradient can't be used in forward mode ({d$transform}).",
        "x" = "Its rule gives vector-Jacobian products (reverse mode); a Jacobian-vector product would ignore it.",
        "i" = "Differentiate in reverse mode: {.fn op_grad}, {d$reverse}."
      ),
      pfor = c(
        "TensorFlow's {.code vectorized_map()} can't use a custom gradient.",
        "x" = "Its vectorised graph differentiates the forward operations and drops the custom rule.",
        "i" = "Map with {.fn op_map} (a loop that keeps the rule), or use the JAX or PyTorch backend, whose {.code vmap} keeps it."
      ),
      c(
        "A custom-gradient function that R runs at every call can't be batched by {d$transform}.",
        "x" = "It could not be traced, so R would run on the transform's tensors.",
        "i" = "Give it {.arg value_like} ({.code op_custom_gradient(f, value_like = \"x\")}), so that R runs once per element in a host callback, compute with tensor operations only so that it traces, or map with {.fn op_map}."
      )
    ),
    trace = c(
      "{.arg f} can't be traced, and tracing is strict.",
      "x" = "{d$reason}",
      "i" = "Compute with tensor operations only (no tensor values read in R, no R random numbers), or use {.code trace = TRUE} to let R run it at every call."
    ),
    not_scalar = c(
      "{.arg f} must return a scalar when {.arg upstream} is {.code NULL}.",
      "x" = "It returned {length(d$shapes)} tensor{?s} of shape{?s} {d$shapes}.",
      "i" = "Reduce the value to one number (with {.fn op_sum}, say), or give {.arg upstream} for a vector-Jacobian product."
    ),
    upstream = if (identical(d$problem, "shape")) {
      c(
        "{.arg upstream} must have the shape of {.arg f}'s value.",
        "x" = "{.arg upstream}{if (is.null(d$tensor)) '' else paste0(' (tensor ', d$tensor, ')')} has shape {d$upstream_shape}; the value has shape {d$value_shape}."
      )
    } else {
      c(
        "{.arg upstream} must be nested like {.arg f}'s value.",
        "x" = "The value holds {d$n_values} tensor{?s}; {.arg upstream} holds {d$n_upstream}, or is nested otherwise."
      )
    },
    input = c(
      "A {d$framework} tensor can't be passed while Keras runs with {.val {d$backend}}.",
      "x" = "It is a {.cls {d$tensor}}.",
      "i" = "Pass a tensor of the active backend, or R values (convert it with {.code as.array()} first)."
    ),
    wrt_dtype = c(
      "Can't differentiate with respect to argument {d$argument}.",
      "x" = "It has dtype {.val {d$dtype}}; gradients need a floating-point dtype.",
      "i" = "Convert it first, with {.code op_cast(x, \"float32\")}, or leave it out of {.arg wrt}."
    ),
    backend_unsupported = c(
      "customgrad does not support the Keras backend {.val {d$backend}}.",
      "i" = "Restart R and choose {.val tensorflow}, {.val jax} or {.val torch} with {.fn keras3::use_backend} before Keras starts."
    ),
    gradcheck_structure = c(
      "{.arg f} must return the same number of tensors for every input.",
      "x" = "It returned {d$expected} at first and {d$returned} for perturbed inputs."
    ),
    internal = c(
      "customgrad failed inside: {d$problem}",
      "i" = "This is a bug in customgrad; please report it with the code that led here."
    )
  )
}

# `fn(args)`, with a backend's error raised while `f` or `grad` ran (a
# Python exception from an op_*() call) as customgrad_error_f or
# customgrad_error_grad: what ran, with which arguments (`described`), and
# the backend's error as the parent, shown with the call in `fn` that raised
# it rather than reticulate's py_call_impl(). Its Python classes travel as
# a field: a condition with them crosses Python as the Python exception it
# names (reticulate), so they are added to the class only in R, where the
# error reaches the user (with_backend_classes()).
# `host`: R runs in a host callback (_host.py), where every error of `fn`'s
# own stops the computation as one of these, with its R classes kept.
call_with_backend_errors <- function(
  fn,
  args,
  what,
  described = args,
  host = FALSE
) {
  withCallingHandlers(do.call(fn, args), error = function(cnd) {
    if (host && !inherits(cnd, "customgrad_error") && !is_time_limit(cnd)) {
      abort_backend_error(cnd, what, described, host = TRUE)
    }
    if (
      inherits(cnd, "python.builtin.Exception") &&
        !inherits(cnd, "customgrad_error") &&
        is.null(the$py_module$find_error(cnd))
    ) {
      abort_backend_error(
        with_condition_call(cnd, call_made_in(fn)),
        what,
        described
      )
    }
  })
}

abort_backend_error <- function(cnd, what, args, host = FALSE) {
  labels <- names(args) %||% character(length(args))
  labels[!nzchar(labels)] <- paste0("..", which(!nzchar(labels)))
  described <- vapply(args, describe_object, "")
  arguments <- paste0("`", labels, "` = ", described)
  names(arguments) <- rep("*", length(arguments))
  abort_customgrad(
    c(
      if (host && what == "f") {
        "{.arg f} of a custom-gradient function failed in a host callback, inside a compiled computation."
      } else if (host) {
        "The gradient function of a custom-gradient function failed in a host callback, inside a compiled computation."
      } else if (what == "f") {
        "The backend failed in {.arg f} of a custom-gradient function."
      } else {
        "The backend failed in the gradient function of a custom-gradient function."
      },
      "i" = if (length(args) == 0) {
        "{.arg f} was called with no arguments."
      } else {
        "{.arg f} was called with:"
      },
      arguments
    ),
    class = what,
    call = NULL,
    parent = cnd,
    backend_classes = setdiff(
      class(cnd),
      c("python.builtin.object", "rlang_error", "error", "condition")
    )
  )
}

# The call in `fn`'s own code that is running now (during an error in it,
# the one that failed): the innermost call made from `fn`'s frame, such as
# `op_multiply(x, 10)`, `keras$ops$multiply(x, 10)` or `my_helper(x)`, and
# for an S3 method the generic's call (`x * "a"`), as rlang names it.
call_made_in <- function(fn) {
  frames <- seq_len(sys.nframe())
  own <- Filter(function(i) identical(sys.function(i), fn), frames)
  if (length(own) == 0L) {
    return(NULL)
  }
  from_fn <- which(sys.parents() == own[[length(own)]])
  if (length(from_fn) == 0L) {
    return(NULL)
  }
  rlang::error_call(sys.frame(from_fn[[length(from_fn)]]))
}

# A Python exception's R condition with another call (reticulate's is the
# py_call_impl() that raised it). It is a list underneath; `$<-` would set
# a Python attribute instead.
with_condition_call <- function(cnd, call) {
  if (is.null(call) || typeof(cnd) != "list") {
    return(cnd)
  }
  classes <- oldClass(cnd)
  cnd <- unclass(cnd)
  cnd$call <- call
  class(cnd) <- classes
  cnd
}

# The backend's classes among those of a customgrad_error_f or _grad that
# reached the user (not inside a callback from Python: see
# call_with_backend_errors()), so that tryCatch() on them still works.
with_backend_classes <- function(cnd) {
  extra <- .subset2(cnd, "backend_classes")
  if (length(extra) == 0L || inside_python_callback()) {
    return(cnd)
  }
  cls <- class(cnd)
  at <- match("customgrad_error", cls)
  class(cnd) <- c(cls[seq_len(at)], extra, cls[-seq_len(at)])
  cnd
}

# Whether R runs inside a call from Python, asked of Python (see
# errors.called_from_python()).
inside_python_callback <- function() {
  isTRUE(the$py_ready) && import_submodule("errors")$called_from_python()
}

# A customgrad error's fields are R's, also when it carries a backend's
# Python classes (whose `$` method reads Python attributes).
#' @export
`$.customgrad_error` <- function(x, name) .subset2(x, name)

#' @export
`[[.customgrad_error` <- function(x, i, ...) .subset2(x, i)
