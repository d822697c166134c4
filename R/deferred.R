# Deferred ops: inside a custom gradient's `f` and `grad`, tensor ops are
# recorded in R and run in Python when the function returns.
#
# Why: every call into Python costs reticulate 1.28 ~40 us, most of it making
# the R handle of the result, and a tensor that R references lives until R's
# garbage collector runs. Recorded, the ops of `f` cost no crossing: the tape
# goes to Python with the callback's result (inst/python/customgrad/
# _deferred.py runs it), and the temporaries never reach R.
#
# A recorded op is a node (class `customgrad_deferred`): an environment with
# the op's name and arguments. Anything that needs its value (printing,
# `$`, conversion, an op that is not recorded, reticulate) forces it: its
# pending ancestors run in Python in one call, and the node keeps the value.
# Ops are pure, so a node can always be computed again from its inputs.

# keras.ops functions that are recorded: deterministic, one tensor out.
deferrable_ops <- c(
  # elementwise, one input
  "abs",
  "absolute",
  "negative",
  "exp",
  "exp2",
  "expm1",
  "log",
  "log1p",
  "log2",
  "log10",
  "sqrt",
  "square",
  "sign",
  "sin",
  "cos",
  "tan",
  "arcsin",
  "arccos",
  "arctan",
  "sinh",
  "cosh",
  "tanh",
  "arcsinh",
  "arccosh",
  "arctanh",
  "reciprocal",
  "floor",
  "ceil",
  "round",
  "trunc",
  "logical_not",
  "sigmoid",
  "softplus",
  "softsign",
  "relu",
  "relu6",
  "silu",
  "gelu",
  "log_sigmoid",
  "hard_sigmoid",
  "leaky_relu",
  "elu",
  "selu",
  "erf",
  "stop_gradient",
  "ones_like",
  "zeros_like",
  "cast",
  "clip",
  "convert_to_tensor",
  # elementwise, two inputs
  "add",
  "subtract",
  "multiply",
  "divide",
  "true_divide",
  "power",
  "maximum",
  "minimum",
  "mod",
  "floor_divide",
  "equal",
  "not_equal",
  "less",
  "less_equal",
  "greater",
  "greater_equal",
  "logical_and",
  "logical_or",
  "logical_xor",
  "arctan2",
  # reductions, products and shapes
  "sum",
  "mean",
  "max",
  "min",
  "prod",
  "any",
  "all",
  "logsumexp",
  "var",
  "std",
  "matmul",
  "dot",
  "softmax",
  "log_softmax",
  "reshape",
  "transpose",
  "expand_dims",
  "squeeze"
)

deferrable <- new.env(parent = emptyenv())
for (name in deferrable_ops) {
  assign(name, TRUE, envir = deferrable)
}
rm(name)

# --- sessions: one per run of `f` or `grad` ----------------------------------

# `known` are the tensors the callback got from Python (f's inputs, grad's
# upstream): the tape names them by id instead of sending them back.
# `parent` is the session of the forward call whose `grad` this is: its
# ops' values are still in Python while `grad` runs.
open_session <- function(known = list(), parent = NULL) {
  if (!isTRUE(getOption("customgrad.defer_ops", TRUE))) {
    return(NULL)
  }
  session <- new.env(hash = FALSE, parent = emptyenv())
  session$tape <- list()
  session$n <- 0L
  session$parent <- parent
  session$known <- known
  session$known_ids <- vapply(
    known,
    function(x) {
      if (inherits(x, "python.builtin.object")) new_node_id() else 0
    },
    0
  )
  session$outer <- the$session
  the$session <- session
  session
}

close_session <- function(session) {
  if (!is.null(session)) the$session <- session$outer
}

new_node_id <- function() {
  the$node_id <- the$node_id + 1
}

# The id of a tensor the session (or its parent) got from Python, or NULL.
known_id <- function(session, x) {
  while (!is.null(session)) {
    known <- session$known
    for (k in seq_along(known)) {
      if (identical(known[[k]], x)) {
        id <- session$known_ids[[k]]
        if (id > 0) return(id)
      }
    }
    session <- session$parent
  }
  NULL
}

# An R function that Python calls (a custom gradient's forward, an
# op_cond() branch, an op_map() body, ...) starts outside any recording:
# the caller's ops must not be mixed into its session.
outside_session <- function(fn) {
  force(fn)
  function(...) {
    outer <- the$session
    if (is.null(outer)) {
      return(fn(...))
    }
    the$session <- NULL
    on.exit(the$session <- outer)
    fn(...)
  }
}

# --- recording ---------------------------------------------------------------

# Record keras.ops.<name>(args) in `session` and return its node; NULL when
# an argument can't be recorded (R vectors, lists, functions). The
# instruction is made here: [id, op, args, kwargs, refs], where `refs` are
# the positions in `args` that hold the id of a node or known tensor.
defer_op <- function(session, name, args) {
  nms <- names(args)
  values <- args
  refs <- NULL
  for (i in seq_along(args)) {
    a <- args[[i]]
    if (is.environment(a)) {
      named <- !is.null(nms) && nzchar(nms[[i]])
      if (inherits(a, "customgrad_deferred")) {
        s <- .subset2(a, "session")
        if (!named && (identical(s, session) || identical(s, session$parent))) {
          values[[i]] <- .subset2(a, "id")
          refs <- c(refs, i - 1L)
        } else {
          values[i] <- list(force_deferred(a))
        }
      } else if (!named) {
        id <- known_id(session, a)
        if (!is.null(id)) {
          values[[i]] <- id
          refs <- c(refs, i - 1L)
        }
      }
    } else if (
      !is.null(a) && (!is.atomic(a) || length(a) != 1L || !is.null(dim(a)))
    ) {
      return(NULL)
    }
  }
  kwargs <- NULL
  if (!is.null(nms)) {
    named <- nzchar(nms)
    kwargs <- values[named]
    values <- unname(values[!named])
  }
  id <- the$node_id <- the$node_id + 1
  # Unhashed: a node has four fields, and a hash table costs more to make.
  node <- new.env(hash = FALSE, parent = emptyenv())
  node$id <- id
  node$session <- session
  node$args <- args
  instruction <- list(id, name, values, kwargs, refs)
  node$instruction <- instruction
  class(node) <- "customgrad_deferred"
  n <- session$n + 1L
  session$n <- n
  session$tape[[n]] <- instruction
  node
}

# A stand-in for grad's upstream while grad is recorded ahead of the
# backward pass (record_grad()): Python puts upstream under its id. Its
# value can't be had in R: forcing it is an error that ends the recording.
placeholder_node <- function(session) {
  node <- new.env(hash = FALSE, parent = emptyenv())
  node$id <- new_node_id()
  node$session <- session
  node$placeholder <- TRUE
  class(node) <- "customgrad_deferred"
  node
}

abort_placeholder <- function() {
  rlang::abort("upstream has no value yet", class = "customgrad_placeholder")
}

# A result of `f` or `grad` for Python: nodes that Python has by id become
# markers, other nodes their values, and tuple() lists plain lists (tuple()
# only marks lists for the reader).
encode_deferred <- function(x, session) {
  if (inherits(x, "customgrad_deferred")) {
    value <- .subset2(x, "value")
    if (!is.null(value)) {
      return(value)
    }
    s <- .subset2(x, "session")
    if (
      !is.null(session) &&
        (identical(s, session) || identical(s, session$parent))
    ) {
      return(list(.customgrad_node = .subset2(x, "id")))
    }
    return(force_deferred(x))
  }
  if (inherits(x, "python.builtin.object") && !is.null(session)) {
    id <- known_id(session, x)
    if (!is.null(id)) {
      return(list(.customgrad_node = id))
    }
    return(x)
  }
  if (is.list(x) && !inherits(x, "python.builtin.object")) {
    if (inherits(x, "customgrad_tuple")) {
      x <- unclass(x)
    }
    for (i in seq_along(x)) {
      if (!is.null(x[[i]])) x[[i]] <- encode_deferred(x[[i]], session)
    }
  }
  x
}

# The value of a node, computed now if it has none yet: its instruction and
# those of the nodes it refers to run in Python in one call. (Known tensors
# are sent as themselves.)
force_deferred <- function(node) {
  value <- .subset2(node, "value")
  if (!is.null(value)) {
    return(value)
  }
  if (isTRUE(.subset2(node, "placeholder"))) {
    abort_placeholder()
  }
  tape <- list()
  seen <- new.env(parent = emptyenv())
  collect <- function(n) {
    key <- as.character(.subset2(n, "id"))
    if (!is.null(seen[[key]])) {
      return()
    }
    seen[[key]] <- TRUE
    if (isTRUE(.subset2(n, "placeholder"))) {
      abort_placeholder()
    }
    instruction <- .subset2(n, "instruction")
    args <- .subset2(n, "args")
    positional <- if (is.null(names(args))) args else args[!nzchar(names(args))]
    refs <- NULL
    for (i in instruction[[5]] + 1L) {
      a <- positional[[i]]
      if (inherits(a, "customgrad_deferred")) {
        collect(a)
        refs <- c(refs, i - 1L)
      } else {
        instruction[[3]][i] <- list(a) # a known tensor: send it
      }
    }
    instruction[5] <- list(refs)
    tape[[length(tape) + 1L]] <<- instruction
  }
  collect(node)
  value <- with_python_errors(
    py_call_fast(
      customgrad_deferred_py()$force,
      list(tape, .subset2(node, "id"))
    ),
    call = NULL
  )
  assign("value", value, envir = node)
  value
}

customgrad_deferred_py <- function() {
  if (is.null(the$deferred_py)) {
    customgrad_py()
    the$deferred_py <- reticulate::import(
      "customgrad._deferred",
      convert = FALSE
    )
  }
  the$deferred_py
}

# --- a node behaves like the tensor it stands for ----------------------------

deferred_method <- function(method) {
  force(method)
  function(x, ...) method(force_deferred(x), ...)
}

register_deferred_methods <- function() {
  base <- asNamespace("base")
  forcing <- c(
    tensor_value_methods(),
    list(
      `$` = function(x, name) do.call(`$`, list(x, name)),
      `[[` = function(x, ...) x[[...]],
      `[` = function(x, ...) x[...]
    )
  )
  methods <- c(tensor_compute_methods(), lapply(forcing, deferred_method))
  for (generic in names(methods)) {
    registerS3method(
      generic,
      "customgrad_deferred",
      methods[[generic]],
      envir = base
    )
  }
  registerS3method(
    "str",
    "customgrad_deferred",
    deferred_method(utils::str),
    envir = asNamespace("utils")
  )
  registerS3method(
    "r_to_py",
    "customgrad_deferred",
    function(x, convert = FALSE) {
      force_deferred(x)
    },
    envir = asNamespace("reticulate")
  )
  registerS3method(
    "py_to_r",
    "customgrad_deferred",
    function(x) {
      reticulate::py_to_r(force_deferred(x))
    },
    envir = asNamespace("reticulate")
  )
}
