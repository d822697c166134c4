# The Keras backend. keras3 chooses it (use_backend(), KERAS_BACKEND) and
# reports it (config_backend()); customgrad only asks which one it is
# without starting Python, and whether one can run.

#' Is a Keras backend ready to use?
#'
#' `TRUE` when Python, Keras and the backend's Python module can be found
#' and Keras is not already running with another backend. Where no Python
#' is chosen or found, reticulate provisions one for what keras3 and
#' customgrad declare (keras3's default set-up), as keras3 would at its
#' first use, and that one counts. Never fails, so it suits `if ()`
#' guards, examples and vignettes. It starts Python but imports neither
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
  # With no Python chosen or found, py_available() provisions one as
  # keras3's first use would (start_python()).
  tryCatch(
    reticulate::py_available(initialize = TRUE) &&
      py_module_installed("keras") &&
      py_module_installed(backend_module(backend)),
    error = function(cnd) FALSE
  )
}

# Whether Python can import `module`, without importing it
# (reticulate::py_module_available() imports it, and importing keras would
# fix the backend before keras3's use_backend() had a say).
py_module_installed <- function(module) {
  util <- reticulate::import("importlib.util", convert = TRUE)
  !is.null(util$find_spec(module))
}

backend_names <- c("tensorflow", "jax", "torch")

backend_module <- function(backend) {
  switch(backend, tensorflow = "tensorflow", jax = "jax", torch = "torch")
}

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
