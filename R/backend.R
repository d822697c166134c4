# The Keras backend. keras3 chooses it (use_backend(), KERAS_BACKEND) and
# reports it (config_backend()); customgrad only asks which one it is
# without starting Python, and whether one can run.

#' Is a Keras backend ready to use?
#'
#' `TRUE` when Python, Keras and the backend's Python module are installed
#' and Keras is not already running with another backend. It answers from
#' what is already there: the Python running in this session, or else the
#' one reticulate would start without installing anything (an explicit
#' choice such as `RETICULATE_PYTHON` or [reticulate::use_python()], an
#' active virtual environment, keras3's `r-keras` or reticulate's
#' `r-reticulate` environment). It never provisions one: where no Python
#' is chosen or found, keras3's first use in your session would download
#' one with what keras3 and customgrad declare ([reticulate::py_require()]),
#' and until then `backend_available()` is `FALSE`. It never downloads
#' anything, so it suits `if ()` guards, examples, vignettes and checks on
#' machines with no Python or no network. It does not start Python (it
#' asks the Python it finds in a process of its own) and imports neither
#' Keras nor a backend: choosing the backend with [keras3::use_backend()]
#' afterwards still works.
#'
#' @param backend A backend name; by default the one chosen with
#'   [keras3::use_backend()] (or the `KERAS_BACKEND` environment variable).
#' @returns `TRUE` or `FALSE`.
#' @seealso [keras3::use_backend()] and [keras3::config_backend()] to choose
#'   and report the backend; [customgrad_config()] for the Python in use,
#'   why, and what each backend sees; [keras3::install_keras()] to set up a
#'   Python.
#' @export
#' @examples
#' backend_available()
backend_available <- function(backend = backend_name()) {
  if (
    !is.character(backend) ||
      length(backend) != 1 ||
      !backend %in% backend_names
  ) {
    return(FALSE)
  }
  active <- keras_backend_in_python()
  if (!is.null(active)) {
    return(identical(active, backend))
  }
  # Each backend is a Python module of its name.
  modules <- c("keras", backend)
  tryCatch(
    if (reticulate::py_available(initialize = FALSE)) {
      all(vapply(modules, py_module_installed, TRUE))
    } else {
      modules_installed_in(python_choice(), modules)
    },
    error = function(cnd) FALSE
  )
}

# Whether the Python reticulate would start (`config`, see python_choice())
# has `modules`, asked of it in a process of its own: starting it here
# would run reticulate's check of a virtual environment's packages, which
# has uv resolve them against the package index. FALSE for the Python
# reticulate would provision (no configuration, or "managed"), so asking
# downloads nothing.
modules_installed_in <- function(config, modules) {
  python <- config$python
  if (is.null(python) || identical(python, "managed") || !file.exists(python)) {
    return(FALSE)
  }
  code <- sprintf(
    "import importlib.util as u; print(all(u.find_spec(m) for m in %s))",
    python_list(modules)
  )
  identical(run_python(python, code), "True")
}

# Whether Python can import `module`, without importing it
# (reticulate::py_module_available() imports it, and importing keras would
# fix the backend before keras3's use_backend() had a say).
py_module_installed <- function(module) {
  util <- reticulate::import("importlib.util", convert = TRUE)
  !is.null(util$find_spec(module))
}

backend_names <- c("tensorflow", "jax", "torch")

# The backend Keras runs with, or will run with once started: like
# keras3::config_backend(), but without starting Python.
backend_name <- function() {
  chosen <- Sys.getenv("KERAS_BACKEND")
  keras_backend_in_python() %||% if (nzchar(chosen)) chosen else "tensorflow"
}

# Keras' backend if some code already imported keras in this Python, else
# NULL. Does not start Python.
keras_backend_in_python <- function() {
  if (!reticulate::py_available(initialize = FALSE)) {
    return(NULL)
  }
  modules <- reticulate::import("sys", convert = FALSE)$modules
  if (!reticulate::py_to_r(modules$`__contains__`("keras"))) {
    return(NULL)
  }
  reticulate::py_to_r(
    reticulate::import("keras", convert = FALSE)$config$backend()
  )
}
