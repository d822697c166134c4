# From R values to tensors: one converter, one set of rules and errors, for
# the arguments of custom-gradient functions, op_grad(), op_compile(),
# gradcheck() and for what `f` returns to the last three.
#
# * Tensors (any Python object) pass as they are.
# * R doubles become tensors (r_to_tensor()); so do integer and logical
#   vectors and arrays (int32, bool). Length 0 is a tensor of shape (0), as
#   keras3's op_convert_to_tensor() makes it.
# * `NA` is an error of class `customgrad_error_na`; `NaN` passes.
# * Lists are nested inputs, element by element, names kept.
# * Options (`NULL`, strings, functions, a single integer or logical such
#   as `axis = 2L`) exist only where `state` keeps them: the arguments of a
#   custom-gradient function (see static_input()). A list can't mix them
#   with tensors.
# * Where a value is differentiated (`differentiable = TRUE`), R integers
#   are numbers, made floating point, and logicals are an error.
# * Anything else (factors, data frames, complex numbers) is an error of
#   class `customgrad_error_input` naming the argument.

# `what` names `x` in errors ("Argument `x`"); `dtype` is the dtype of R
# numbers (NULL: r_to_tensor()'s).
as_input <- function(
  x,
  what,
  call = NULL,
  state = NULL,
  dtype = NULL,
  differentiable = FALSE,
  nested = FALSE
) {
  if (reticulate::is_py_object(x)) {
    return(x)
  }
  if ((is.double(x) || is.integer(x) || is.logical(x)) && !is.object(x)) {
    check_no_na(x, what = what, call = call)
    if (!is.null(state) && !is.double(x) && is_option_scalar(x)) {
      return(static_input(x, state))
    }
    if (differentiable) {
      if (is.logical(x)) {
        abort_input(x, what, "can't be differentiated", call, nested)
      }
      storage.mode(x) <- "double"
    }
    return(r_to_tensor(x, dtype = dtype))
  }
  if (is.list(x) && !is.object(x)) {
    inputs <- lapply(
      x,
      as_input,
      what = what,
      call = call,
      state = state,
      dtype = dtype,
      differentiable = differentiable,
      nested = TRUE
    )
    if (!is.null(state)) {
      check_no_mixed_options(inputs, what = what, call = call)
    }
    return(inputs)
  }
  if (!is.null(state) && is_option(x)) {
    return(static_input(x, state))
  }
  abort_input(
    x,
    what,
    "must be a tensor",
    call,
    nested,
    options = !is.null(state)
  )
}

# A single integer or logical, without dimensions: an option (`axis = 2L`,
# `keepdims = TRUE`), where options are taken.
is_option_scalar <- function(x) {
  length(x) == 1L && is.null(dim(x))
}

is_option <- function(x) {
  is.null(x) || is.character(x) && !is.object(x) || is.function(x)
}

abort_input <- function(x, what, problem, call, nested, options = FALSE) {
  accepted <- if (options) {
    "tensors, R numbers, arrays or logicals (or lists of them) for values, and {.code NULL}, strings, single integers or logicals for options"
  } else {
    "tensors, R numbers, arrays or logicals, or lists of them"
  }
  hint <- if (is.data.frame(x)) {
    "Convert it with {.code as.matrix()} first."
  } else if (is.factor(x)) {
    "Convert it with {.code as.integer()} or {.code as.character()} first."
  } else if (is.logical(x)) {
    "Pass it as a number ({.code as.numeric()}) to differentiate it."
  } else {
    paste0("Pass ", accepted, ".")
  }
  abort_customgrad(
    c(
      if (problem != "must be a tensor") {
        "{what} {problem}."
      } else if (options) {
        "{what} can't be passed to a custom-gradient function."
      } else {
        "{what} can't be converted to a tensor."
      },
      "x" = "It {if (nested) 'contains' else 'is'} {describe_object(x)}.",
      "i" = hint
    ),
    class = "input",
    call = call
  )
}

# A non-tensor argument of a custom-gradient function: kept in
# `state$statics` under the hash of its value (the key enters the trace's
# signature); Python gets a marker with the key (r_to_py.customgrad_static()).
static_input <- function(x, state) {
  statics <- state$statics
  if (length(statics) > 256L) {
    # Keys of values no longer in use pile up: start afresh.
    rm(list = names(statics), envir = statics)
  }
  key <- rlang::hash(x)
  assign(key, x, envir = statics)
  structure(list(key = key), class = "customgrad_static")
}

# An argument of `f` that the call did not pass: its place is kept, so that
# the arguments after it keep theirs, and `f` uses its default. Python's
# key for it is `_structure.MISSING`.
missing_input <- function() {
  structure(list(key = "missing"), class = "customgrad_static")
}

#' @rawNamespace S3method(reticulate::r_to_py, customgrad_static)
r_to_py.customgrad_static <- function(x, convert = FALSE) {
  customgrad_py()$Static(x$key)
}

# f's inputs from Python, with the values of non-tensor arguments back in
# place of their markers; arguments not passed are `missing_arg()`.
restore_statics <- function(inputs, statics) {
  lapply(inputs, function(x) {
    if (inherits(x, "customgrad._structure.Static")) {
      key <- reticulate::py_to_r(x$key)
      if (identical(key, "missing")) {
        return(missing_arg())
      }
      return(get(key, envir = statics))
    }
    if (is.list(x) && !reticulate::is_py_object(x)) {
      return(restore_statics(x, statics))
    }
    x
  })
}

missing_arg <- function() {
  structure(list(), class = "customgrad_missing")
}

# The arguments `f` is called with: by name (so that an argument not passed
# leaves its place to `f`'s default), without those not passed. An `f`
# with `...` gets them as the call passed them.
passed_inputs <- function(inputs, state) {
  if ("..." %in% state$arg_names) {
    return(inputs)
  }
  # Python callers (jax$grad(h), a layer) pass the leading arguments only.
  names(inputs) <- state$arg_names[seq_along(inputs)]
  missing <- vapply(inputs, inherits, TRUE, "customgrad_missing")
  inputs[!missing]
}

# An R value as a tensor, through keras3's op_convert_to_tensor(). R doubles
# all get the dtype keras3 gives an R vector of doubles (float64 on
# TensorFlow and PyTorch, float32 on JAX), R numbers included: keras3 alone
# would make an R number float32, and TensorFlow refuses to mix the two in
# one operation.
r_to_tensor <- function(x, dtype = NULL) {
  if (is.null(dtype) && is.double(x) && length(x) == 1L && is.null(dim(x))) {
    the$np_asarray <- the$np_asarray %||%
      reticulate::import("numpy", convert = FALSE)$asarray
    x <- the$np_asarray(x) # a 0-d array
  }
  keras3::op_convert_to_tensor(x, dtype = dtype)
}
