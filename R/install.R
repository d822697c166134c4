#' Install customgrad's Python environment
#'
#' Creates a Python virtual environment at [python_env_path()] and installs
#' Keras 3 with the chosen backends, at versions checked to work together
#' (listed in `system.file("python", "requirements.txt", package =
#' "customgrad")`). Running it again is quick: an environment that already
#' has these versions is left alone. Restart R afterwards if Python was
#' already running in this session.
#'
#' @param backends Backends to install, any of `"tensorflow"`, `"jax"` and
#'   `"torch"`.
#' @param python The Python used to create the environment. By default
#'   Debian's `/usr/bin/python3.11` where it exists, else `python3` on the
#'   `PATH`.
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
  if (!file.exists(python_env_python(envname))) {
    python <- python %||% default_python()
    check_python_version(python)
    cli::cli_progress_step(
      "Creating a virtual environment with {.file {python}} at {.file {envname}}"
    )
    dir.create(dirname(envname), recursive = TRUE, showWarnings = FALSE)
    run_command(python, c("-m", "venv", envname))
    cli::cli_progress_done()
  }
  req_file <- tempfile("requirements", fileext = ".txt")
  on.exit(unlink(req_file), add = TRUE)
  writeLines(requirements, req_file)
  cli::cli_alert_info(
    "Installing {.val {backends}} with pip (several minutes the first time; pip shows progress)."
  )
  run_command(
    python_env_python(envname),
    c("-m", "pip", "install", "-r", req_file)
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

default_python <- function() {
  if (file.exists("/usr/bin/python3.11")) {
    return("/usr/bin/python3.11")
  }
  python <- Sys.which("python3")
  if (!nzchar(python)) {
    abort_customgrad(
      c(
        "Can't find a Python to create customgrad's environment.",
        "i" = "Install Python 3.11 (on Debian: {.code apt-get install python3.11-venv}) or pass {.arg python}."
      ),
      class = "python_missing"
    )
  }
  unname(python)
}

run_command <- function(command, args, call = rlang::caller_env()) {
  status <- system2(command, args)
  if (!identical(status, 0L)) {
    abort_customgrad(
      "{.code {paste(c(command, args), collapse = ' ')}} failed with status {status}.",
      class = "install_failed",
      call = call
    )
  }
  invisible(status)
}
