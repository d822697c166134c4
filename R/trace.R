# Tracing: Python runs f and grad once per input signature on Keras
# symbolic tensors (KerasTensor) and replays what they did (inst/python,
# _trace.py and _program.py). Here: running f and grad while tracing, which
# makes reading a value or drawing R random numbers a failed trace; and the
# one-time message and the retrace warning that Python asks R to show.

# Evaluate `expr` (f or grad) as traced: reading a tensor's value in R is
# an error (see keras_tensor_methods()), and so is drawing R random
# numbers, whose values the trace would fix. `f`, the function traced: one
# that reads what no check sees (untraceable_reads()) is not run at all.
run_traced <- function(expr, f = NULL) {
  reads <- untraceable_reads(f)
  if (length(reads)) {
    abort_customgrad(
      "It reads {reads[[1]]} which a trace would fix at what it was then.",
      class = "trace_read",
      call = NULL
    )
  }
  the$tracing <- the$tracing + 1L
  on.exit(the$tracing <- the$tracing - 1L)
  # R's longest error message while f runs on placeholders, where Keras'
  # errors are long: reticulate 1.46 shortens a Python error's message past
  # `warning.length` with a C++ error of its own instead (std::out_of_range)
  # when its first two lines are longer than that (test-trace.R).
  messages <- options(warning.length = 8170L)
  on.exit(options(messages), add = TRUE)
  seed <- random_seed()
  # R's Ops dispatch can't choose between a symbolic tensor's methods and
  # another tensor's (a captured TensorFlow variable): it warns
  # "Incompatible methods", then fails. That error is replaced by one with
  # a hint. Not raised from the warning's handler: a warning signalled in R
  # that Python called (f's inner functions, run on Keras' placeholders)
  # reaches this handler past Python's frames, and an error raised here
  # would unwind them without Python knowing (it left TensorFlow's scratch
  # graph the default graph).
  mixed <- FALSE
  value <- withCallingHandlers(
    expr,
    warning = function(cnd) {
      if (startsWith(conditionMessage(cnd), "Incompatible methods")) {
        mixed <<- TRUE
        invokeRestart("muffleWarning")
      }
    },
    error = function(cnd) if (mixed) abort_mixed_operands()
  )
  if (!identical(seed, random_seed())) {
    # R runs f at every call from now on: its first call draws what R
    # would have drawn, not the draw after the trace's.
    restore_random_seed(seed)
    abort_customgrad(
      "It used R's random numbers, which a trace would fix at one draw.",
      class = "trace_read",
      call = NULL
    )
  }
  value
}

# Custom-gradient functions calling themselves (or each other) without end,
# also through op_grad() and op_compile(), which R enters from Python too:
# every level runs R, reticulate and Python, 400-600 kB of C stack, and R's
# own "C stack usage is too close to the limit" in the middle of that can
# leave reticulate, and the session, broken. Stopped while R's stack is
# still half free, so that the error unwinds through every level in order;
# Python also stops past a number of levels (_trace.MAX_DEPTH), and
# before its own recursion limit, for a stack of unknown size.
abort_if_stack_low <- function() {
  info <- Cstack_info()
  size <- info[["size"]]
  if (is.na(size) || info[["current"]] < size * stack_share) {
    return(invisible())
  }
  depth <- tryCatch(
    the$py_module$nesting_depth(),
    error = function(cnd) NA
  )
  abort_customgrad(
    c(
      "Custom-gradient functions can't be nested {depth} levels deep.",
      "x" = "R's C stack is {round(100 * info[['current']] / size)}% used: a function that calls itself without end?",
      "i" = "Stop the recursion with a condition that R decides, such as a depth counter."
    ),
    class = "recursion",
    call = NULL
  )
}

# The share of R's C stack past which abort_if_stack_low() stops.
stack_share <- 0.5

# While tracing, an error that means "this can't be traced" (a value read,
# R's RNG, an operation that fails on symbolic tensors, a plain stop() of
# the user's code there) is replied to Python as a trace-failed record, and
# Python calls R at every call instead, where a real error shows as it
# would untraced. customgrad's own checks of f's and grad's results are
# raised as they are: they fail the same way untraced.
reply_trace_failed_on_error <- function(expr) {
  tryCatch(expr, error = function(cnd) {
    if (inherits(cnd, "customgrad_error_trace_read")) {
      return(trace_failed_reply(conditionMessage(cnd)))
    }
    # A function f calls that R runs at every call, run on the backend's
    # placeholders to infer its value's shape, read their values: untraced,
    # f gives it values.
    if (needs_values(cnd)) {
      return(trace_failed_reply(paste(
        "A custom-gradient function it calls can't be traced, and reads",
        "its inputs' values: with `value_like` it runs as an R host op",
        "inside the trace (`?op_custom_gradient`, \"R's own numerics\")."
      )))
    }
    # customgrad's own checks, and errors the user's code raised with a
    # class of its own (rlang::abort(class = )): meant, not a limit of
    # tracing, so raised at once.
    if (
      inherits(cnd, "customgrad_error") ||
        is_time_limit(cnd) ||
        !reticulate::is_py_object(cnd) &&
          length(setdiff(class(cnd), generic_condition_classes)) > 0L
    ) {
      stop(cnd)
    }
    trace_failed_reply(fallback_reason(cnd))
  })
}

# Whether `cnd` says that a tensor's values were needed where there are
# none: a symbolic tensor read in R, or an R host op without `value_like`.
needs_values <- function(cnd) {
  inherits(cnd, "customgrad_error_symbolic_tensor") ||
    inherits(cnd, "customgrad_error_value_like") &&
      identical(cnd$details$problem, "missing")
}

# A condition's message; a Python error's as Python writes it, without the
# line reticulate adds: the fallback message is printed once, later, when
# `py_last_error()` may tell of another error.
fallback_reason <- function(cnd) {
  if (!reticulate::is_py_object(cnd)) {
    return(conditionMessage(cnd))
  }
  text <- reticulate::py_str(cnd)
  if (any(startsWith(text, keras_symbolic_refusals))) {
    # Keras' long text on JAX and PyTorch; TensorFlow's R dispatch warns
    # first (abort_mixed_operands()).
    return(paste(
      "It gave a traced tensor, which has no value while tracing, to code",
      "that needs a value or the backend's own tensor (such as a Keras",
      "variable's `$assign()`, or a backend function): return the value",
      "and assign it after the call, or use keras3's `op_*()` functions."
    ))
  }
  type <- reticulate::py_get_attr(cnd, "__class__")
  paste0(
    keras_op_failed(cnd),
    reticulate::py_to_r(reticulate::py_get_attr(type, "__name__")),
    ": ",
    text
  )
}

# Where a keras3 op raised the Python error `cnd` in Keras' own code (its
# symbolic shape inference, say: `op_scan()` of a function returning NULL
# for `ys`), a sentence naming it; else "". Python's text alone reads as
# customgrad's own failure.
keras_op_failed <- function(cnd) {
  name <- tryCatch(
    the$py_module$keras_op_of(cnd),
    error = function(e) NULL
  )
  if (!rlang::is_string(name)) {
    return("")
  }
  op <- paste0("op_", name)
  if (!op %in% getNamespaceExports("keras3")) {
    return("")
  }
  sprintf("%s`%s()` failed while tracing: ", keras_op_failed_start, op)
}

keras_op_failed_start <- "keras3's "

# How Keras' errors begin where a KerasTensor reached code that needs a
# backend tensor or a value (keras/src/backend/common/keras_tensor.py).
keras_symbolic_refusals <- c(
  "A KerasTensor cannot be used as input to",
  "A KerasTensor is symbolic"
)

# setTimeLimit() stopping f or grad: not a property of the function, so it
# must not be kept as a failed trace (R has no class for it, only its
# message, in the session's language).
is_time_limit <- function(cnd) {
  limits <- gettext(
    c("reached elapsed time limit", "reached CPU time limit"),
    domain = "R"
  )
  any(startsWith(conditionMessage(cnd), limits))
}

# While tracing, R arithmetic between a symbolic tensor and another kind of
# tensor is a failed trace with a hint (see run_traced()).
abort_mixed_operands <- function() {
  abort_customgrad(
    c(
      "It used R arithmetic between a traced tensor and a tensor of another kind (such as a captured TensorFlow variable).",
      "i" = "Use keras3's {.fn op_*} functions for those, such as {.code op_multiply(x, w)}."
    ),
    class = "trace_read",
    call = NULL
  )
}

random_seed <- function() {
  get0(".Random.seed", envir = globalenv(), inherits = FALSE)
}

# Put R's random number state back as `random_seed()` gave it (NULL: none).
restore_random_seed <- function(seed) {
  if (is.null(seed)) {
    rm(".Random.seed", envir = globalenv())
  } else {
    assign(".Random.seed", seed, envir = globalenv())
  }
}

is_tracing <- function() {
  the$tracing > 0L
}

# A grad callback registered while tracing runs traced too.
traced_callback <- function(callback) {
  force(callback)
  function(upstream, variables = NULL) {
    reply_trace_failed_on_error(run_traced(callback(upstream, variables)))
  }
}

# The most traces a function keeps (customgrad.max_traces, default 32).
max_traces <- function(call = rlang::caller_env()) {
  n <- getOption("customgrad.max_traces", 32L)
  if (!rlang::is_scalar_integerish(n) || n < 1) {
    abort_customgrad(
      c(
        "The option {.code customgrad.max_traces} must be a positive whole number.",
        "x" = "It is {describe_object(n)}."
      ),
      class = "option",
      call = call
    )
  }
  as.integer(n)
}

# Python asks for this once per function, when a signature could not be
# traced and R runs f and grad at every call for it.
inform_fallback <- function(reason, what, kind) {
  cli::cli_inform(
    c(
      "!" = "{what} could not be traced, so R runs it at every call with these inputs (inside a function TensorFlow or JAX compiles: when they compile it).",
      "x" = "{reason}",
      "i" = paste(
        if (startsWith(reason, keras_op_failed_start)) {
          # Tensor operations only, and still no trace: the op's own limit.
          "Call that op with arguments Keras can trace (the error above is Keras' own), or"
        } else {
          "Compute with tensor operations only (no tensor values read in R, no R random numbers) to run without R, or"
        },
        untraced_hint(kind)
      )
    ),
    class = c("customgrad_message_fallback", "customgrad_message")
  )
  invisible(NULL)
}

# How a message names the way to run R at every call without it:
# `op_compile(f, trace = FALSE)` hands R's code to the backend's compiler
# (R runs when it compiles), so for op_compile() it is `f` itself.
untraced_hint <- function(kind) {
  if (identical(kind, "op_compile")) {
    paste(
      "call {.code f} itself to always call R without this message, or use",
      "{.code op_compile(f, trace = FALSE)} to have the backend compile R's",
      "code (R runs when it compiles)."
    )
  } else {
    "use {.code {kind}(f, trace = FALSE)} to always call R without this message."
  }
}

# Python asks for this once per function, at the first trace past the cap.
warn_retrace <- function(count, what, kind) {
  cli::cli_warn(
    c(
      "{what} has been traced {count} times: each new combination of input shapes, dtypes or nesting traces it again.",
      "i" = "Only the latest {max_traces()} traces are kept (option {.code customgrad.max_traces}).",
      "i" = "Call it with inputs of fixed shapes, or use {.code {kind}(f, trace = FALSE)}."
    ),
    class = c("customgrad_warning_retrace", "customgrad_warning")
  )
  invisible(NULL)
}

# --- Keras symbolic tensors --------------------------------------------------

# R methods for KerasTensor: the tensor methods that compute (Ops, Math,
# Summary, ...; see tensor-ops.R), and, for the generics that read a value,
# methods that make the read a failed trace while tracing and otherwise
# leave the object to its usual methods.
keras_tensor_methods <- function() {
  computing <- tensor_methods()[c(
    "Ops",
    "Math",
    "Summary",
    "mean",
    "dim",
    "length"
  )]
  reading <- c(
    "print",
    "format",
    "as.vector",
    "as.double",
    "as.numeric",
    "as.integer",
    "as.logical",
    "as.array",
    "as.matrix"
  )
  c(computing, rlang::set_names(lapply(reading, value_read_method), reading))
}

value_read_method <- function(generic) {
  force(generic)
  function(x, ...) {
    # The call as the user wrote it, for errors (print() and format()
    # outside tracing need none): as.numeric() dispatches to as.double's
    # methods, and rlang finds the call of the generic.
    if (is_tracing()) {
      called <- rlang::error_call(environment())
      written <- if (rlang::is_call(called)) rlang::call_name(called)
      abort_customgrad(
        "It read a tensor's value in R with {.fn {written %||% generic}}.",
        class = "trace_read",
        call = NULL
      )
    }
    if (!generic %in% c("print", "format")) {
      # A symbolic tensor outside tracing (a Keras model being built) has
      # no values to read.
      tensor_values(x, call = rlang::error_call(environment()))
    }
    NextMethod()
  }
}
