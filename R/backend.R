#' Choose the Keras backend
#'
#' Keras fixes its backend when Python first imports it, so choose before
#' the first customgrad call that computes something. The choice can also be
#' made with the `KERAS_BACKEND` environment variable; without either,
#' customgrad uses `"tensorflow"`.
#'
#' @param backend One of `"tensorflow"`, `"jax"` or `"torch"`.
#' @returns `use_backend()` returns `backend`, invisibly. `config_backend()`
#'   returns the name of the backend Keras runs (or will run) with.
#' @export
#' @examples
#' config_backend()
#' \dontrun{
#' # In a new R session, before computing anything:
#' use_backend("jax")
#' }
use_backend <- function(backend) {
  backend <- check_backend(backend)
  active <- the$backend %||% keras_backend_in_python()
  if (!is.null(active) && !identical(active, backend)) {
    abort_backend_locked(backend, active, rlang::current_env())
  }
  Sys.setenv(KERAS_BACKEND = backend)
  invisible(backend)
}

#' @rdname use_backend
#' @export
config_backend <- function() {
  the$backend %||% keras_backend_in_python() %||% backend_choice()
}

#' Is a Keras backend ready to use?
#'
#' `TRUE` when Python, Keras and the backend's Python module can be found
#' and Keras is not already running with another backend. Never fails, so it
#' suits `if ()` guards, examples and vignettes. It starts Python.
#'
#' @param backend A backend name; the active or chosen one by default.
#' @returns `TRUE` or `FALSE`.
#' @export
#' @examples
#' backend_available()
backend_available <- function(backend = config_backend()) {
  if (
    !is.character(backend) ||
      length(backend) != 1 ||
      !backend %in% backend_names
  ) {
    return(FALSE)
  }
  active <- the$backend %||% keras_backend_in_python()
  if (!is.null(active)) {
    return(identical(active, backend))
  }
  tryCatch(
    reticulate::py_available(initialize = TRUE) &&
      reticulate::py_module_available("keras") &&
      reticulate::py_module_available(backend_module(backend)),
    error = function(cnd) FALSE
  )
}

backend_names <- c("tensorflow", "jax", "torch")

backend_module <- function(backend) {
  switch(backend, tensorflow = "tensorflow", jax = "jax", torch = "torch")
}

# The backend the user asked for: KERAS_BACKEND, else tensorflow.
backend_choice <- function(call = rlang::caller_env()) {
  backend <- Sys.getenv("KERAS_BACKEND", unset = "")
  if (!nzchar(backend)) {
    return("tensorflow")
  }
  check_backend(backend, arg = "KERAS_BACKEND", call = call)
}

check_backend <- function(
  backend,
  ...,
  arg = rlang::caller_arg(backend),
  call = rlang::caller_env()
) {
  if (
    !is.character(backend) ||
      length(backend) != 1 ||
      !backend %in% backend_names
  ) {
    abort_customgrad(
      c(
        "{.arg {arg}} must be one of {.or {.val {backend_names}}}.",
        "x" = "It is {describe_object(backend)}{if (is.character(backend)) paste0(': ', encodeString(backend[1], quote = '\"')) else ''}."
      ),
      class = "backend_unknown",
      call = call
    )
  }
  backend
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
  reticulate::py_to_r(reticulate::import(
    "keras",
    convert = FALSE
  )$config$backend())
}

abort_backend_locked <- function(backend, active, call) {
  abort_customgrad(
    c(
      "Can't use the {.val {backend}} backend: Keras is already running with {.val {active}} in this R session.",
      "i" = "Restart R and call {.code use_backend(\"{backend}\")} before any other customgrad function."
    ),
    class = "backend_locked",
    call = call
  )
}
