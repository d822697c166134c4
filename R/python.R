# Python: where customgrad's environment lives, and handles to Keras and to
# customgrad's Python module. Handles are made on first use, never at load
# time, so that library(customgrad) does not start Python and the backend
# can still be chosen.

#' Where customgrad's Python environment lives
#'
#' `install_customgrad()` creates a virtual environment here, and the package
#' uses it when it loads unless `RETICULATE_PYTHON` names another Python.
#'
#' @returns The path of the virtual environment, a string.
#' @export
#' @examples
#' python_env_path()
python_env_path <- function() {
  file.path(tools::R_user_dir("customgrad", "data"), "venv")
}

python_env_python <- function(env = python_env_path()) {
  file.path(env, "bin", "python")
}

# keras, imported with the chosen backend. Every path into Python starts
# here, so KERAS_BACKEND is set before anything imports keras.
keras_module <- function(call = rlang::caller_env()) {
  the$keras %||% load_keras(call)
}

load_keras <- function(call) {
  backend <- backend_choice()
  check_python(backend, call)
  Sys.setenv(KERAS_BACKEND = backend)
  keras <- tryCatch(
    reticulate::import("keras", convert = FALSE),
    error = function(cnd) {
      abort_customgrad(
        c(
          "Can't import Keras with the {.val {backend}} backend.",
          "i" = "Run {.code customgrad::install_customgrad()}, then restart R."
        ),
        class = "python_missing",
        call = call,
        parent = cnd
      )
    }
  )
  active <- reticulate::py_to_r(keras$config$backend())
  if (!identical(active, backend)) {
    abort_backend_locked(backend, active, call)
  }
  the$backend <- active
  the$keras <- keras
  keras
}

check_python <- function(backend, call) {
  python <- tryCatch(
    reticulate::py_discover_config(),
    error = function(cnd) NULL
  )
  ok <- !is.null(python) &&
    reticulate::py_available(initialize = TRUE) &&
    reticulate::py_module_available("keras")
  if (!ok) {
    abort_customgrad(
      c(
        "customgrad needs Python with Keras 3, and it can't find one.",
        "x" = if (!is.null(python)) {
          "Keras isn't installed in {.file {python$python}}."
        },
        "i" = "Run {.code customgrad::install_customgrad()}, then restart R."
      ),
      class = "python_missing",
      call = call
    )
  }
  module <- backend_module(backend)
  if (!reticulate::py_module_available(module)) {
    abort_customgrad(
      c(
        "The {.val {backend}} backend needs the Python module {.pkg {module}}, which isn't installed.",
        "i" = "Run {.code customgrad::install_customgrad(backends = \"{backend}\")}, then restart R."
      ),
      class = "backend_missing",
      call = call
    )
  }
}

# customgrad's own Python module (inst/python/customgrad).
customgrad_py <- function() {
  the$py %||% load_customgrad_py()
}

load_customgrad_py <- function() {
  keras_module()
  path <- system.file("python", package = "customgrad", mustWork = TRUE)
  py <- reticulate::import_from_path("customgrad", path = path, convert = FALSE)
  memory <- reticulate::import("customgrad._memory", convert = FALSE)
  threshold <- getOption("customgrad.gc_threshold_mb", 128) * 2^20
  memory$set_collector(r_callback(collect_garbage), threshold)
  bridge <- reticulate::import("customgrad._bridge", convert = FALSE)
  bridge$set_grad_runner(r_callback(run_grad))
  the$memory <- memory
  the$py <- py
  py
}

# Called from Python when tensors handed to R since the last collection pass
# customgrad.gc_threshold_mb: R's references are what keeps them alive.
collect_garbage <- function() {
  gc(full = FALSE, verbose = FALSE)
  invisible(NULL)
}

cache_keras_op <- function(name) {
  customgrad_py()
  fn <- the$memory$wrap(reticulate::py_call(customgrad_deferred_py()$op, name))
  assign(name, fn, envir = the$ops)
  fn
}

# Call keras.ops.<name>(...) through a cached callable: after the first call
# an environment look-up, no attribute look-up and no result conversion.
call_op <- function(name, ...) {
  # Inside f and grad of a custom gradient, record instead (deferred.R).
  session <- the$session
  if (!is.null(session) && !is.null(deferrable[[name]])) {
    node <- defer_op(session, name, list(...))
    if (!is.null(node)) {
      return(node)
    }
  }
  py_call_fast(the$ops[[name]] %||% cache_keras_op(name), list(...))
}

# A Python list or dict of tensors (a multi-output result) as an R list.
# reticulate's py_to_r() hands the tensors in it back with conversion on,
# unlike every other tensor customgrad returns (`$numpy()` would then give
# an R array): turn it off, in the flag reticulate keeps in the reference.
py_nest_to_r <- function(x) {
  unconverted(reticulate::py_to_r(x))
}

unconverted <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    if (is.environment(x) && exists("convert", envir = x, inherits = FALSE)) {
      assign("convert", FALSE, envir = x)
    }
    return(x)
  }
  if (is.list(x)) {
    for (i in seq_along(x)) {
      if (!is.null(x[[i]])) x[[i]] <- unconverted(x[[i]])
    }
  }
  x
}

# reticulate::py_call() without its per-call checks (Python is running once
# a callable exists): its internal py_call_impl() where reticulate has one,
# ~7 us less per call in reticulate 1.28.
py_call_fast <- function(fn, args) {
  nms <- names(args)
  if (is.null(nms)) {
    return(the$py_call_impl(fn, args, NULL))
  }
  named <- nzchar(nms)
  the$py_call_impl(fn, args[!named], args[named])
}
