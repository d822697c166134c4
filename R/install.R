#' Install customgrad's Python environment
#'
#' Creates a Python virtual environment at [python_env_path()] with
#' [reticulate::virtualenv_create()] and installs Keras 3 with the chosen
#' backends ([reticulate::virtualenv_install()]), at versions checked to
#' work together (listed in `system.file("python", "requirements.txt",
#' package = "customgrad")`). Running it again is quick: an environment
#' that already has these versions is left alone. Restart R afterwards if
#' Python was already running in this session.
#'
#' @param backends Backends to install, any of `"tensorflow"`, `"jax"` and
#'   `"torch"`.
#' @param python The Python used to create the environment. By default a
#'   Python 3.11 that [reticulate::virtualenv_starter()] finds, else any
#'   Python 3.10 or newer it finds; [reticulate::install_python()] installs
#'   one.
#' @param envname Where to create the environment.
#' @param extra_packages More pip requirements to install, such as `"pytest"`.
#' @param force Reinstall even if the environment looks complete.
#' @returns The environment's path, invisibly.
#' @export
#' @examples
#' \dontrun{
#' install_customgrad()
#' install_customgrad(backends = "jax")
#' }
install_customgrad <- function(
  backends = c("tensorflow", "jax", "torch"),
  python = NULL,
  envname = python_env_path(),
  extra_packages = NULL,
  force = FALSE
) {
  backends <- unname(vapply(
    backends,
    check_backend,
    "",
    arg = "backends",
    call = rlang::current_env()
  ))
  requirements <- c(python_requirements(backends), extra_packages)
  stamp <- file.path(envname, "customgrad-requirements.txt")
  if (
    !force && file.exists(stamp) && identical(readLines(stamp), requirements)
  ) {
    cli::cli_alert_success(
      "customgrad's Python environment is up to date: {.file {envname}}."
    )
    return(invisible(envname))
  }
  if (!reticulate::virtualenv_exists(envname)) {
    python <- python %||% default_python()
    check_python_version(python)
    cli::cli_progress_step(
      "Creating a virtual environment with {.file {python}} at {.file {envname}}"
    )
    dir.create(dirname(envname), recursive = TRUE, showWarnings = FALSE)
    with_install_errors(
      reticulate::virtualenv_create(envname, python = python, packages = NULL)
    )
    cli::cli_progress_done()
  }
  cli::cli_alert_info(
    "Installing {.val {backends}} with pip (several minutes the first time; pip shows progress)."
  )
  with_install_errors(
    reticulate::virtualenv_install(envname, packages = requirements)
  )
  writeLines(requirements, stamp)
  cli::cli_alert_success(
    "Installed customgrad's Python environment at {.file {envname}}."
  )
  if (reticulate::py_available(initialize = FALSE)) {
    cli::cli_alert_warning(
      "Python is already running in this R session: restart R to use the new environment."
    )
  }
  invisible(envname)
}

# The pinned requirement lines for these backends, without comments.
python_requirements <- function(backends) {
  path <- system.file(
    "python",
    "requirements.txt",
    package = "customgrad",
    mustWork = TRUE
  )
  lines <- trimws(readLines(path))
  lines <- lines[nzchar(lines) & !startsWith(lines, "#")]
  tag <- sub("^.*#\\s*backend:\\s*", "", lines)
  tagged <- grepl("#\\s*backend:", lines)
  keep <- !tagged | tag %in% backends
  trimws(sub("#.*$", "", lines[keep]))
}

# Python 3.11 first: the pinned versions are tested with it (Debian's
# /usr/bin/python3.11 here); else any 3.10 or newer that reticulate finds.
default_python <- function() {
  python <- reticulate::virtualenv_starter("3.11") %||%
    reticulate::virtualenv_starter(">=3.10")
  if (is.null(python)) {
    abort_customgrad(
      c(
        "Can't find a Python to create customgrad's environment.",
        "i" = "Install Python 3.11 with {.code reticulate::install_python(\"3.11\")} (on Debian: {.code apt-get install python3.11-venv}), or pass {.arg python}."
      ),
      class = "python_missing"
    )
  }
  unname(python)
}

# reticulate's set-up functions fail with plain errors: they become
# customgrad's classed one, with reticulate's as the cause.
with_install_errors <- function(expr, call = rlang::caller_env()) {
  tryCatch(
    expr,
    error = function(cnd) {
      abort_customgrad(
        c(
          "Can't install customgrad's Python environment.",
          "i" = "Check the network (or pip's index), then run {.code install_customgrad(force = TRUE)}."
        ),
        class = "install_failed",
        parent = cnd,
        call = call
      )
    }
  )
}
