# Helpers for test-python-once.R.

# In a new R process with the environment variables `...` (and `unset`
# removed), attach customgrad and make the first custom-gradient call: what
# it raised, and which Python (if any) started. `output` collects the
# process's printed output.
first_call_in_fresh_r <- function(..., unset = character(), output = NULL) {
  callr::r(
    function(unset) {
      Sys.unsetenv(unset)
      library(customgrad)
      h <- op_custom_gradient(function(x) list(x, function(upstream) upstream))
      err <- tryCatch(h(0), error = function(e) e)
      started <- reticulate::py_available(initialize = FALSE)
      list(
        class = class(err),
        message = conditionMessage(err),
        started = started,
        python = if (started) reticulate::py_config()$python
      )
    },
    args = list(unset = unset),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), ...),
    stdout = output,
    stderr = output
  )
}

# A virtual environment at `path` made from the base interpreter of the
# Python these tests run on (so on any platform), removed after the test;
# with `packages`, it sees that Python's packages through a .pth file, as
# a keras3 user's environment with Keras and the backends would. Returns
# the environment's python.
local_python_env <- function(
  path,
  packages = TRUE,
  .local_envir = parent.frame()
) {
  python <- reticulate::py_config()$python
  status <- system2(python, c("-m", "venv", "--without-pip", shQuote(path)))
  if (!identical(status, 0L)) {
    stop("Can't make a virtual environment at ", path)
  }
  withr::defer(unlink(path, recursive = TRUE), envir = .local_envir)
  env_python <- reticulate::virtualenv_python(path)
  if (packages) {
    purelib <- "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    ours <- system2(python, c("-c", shQuote(purelib)), stdout = TRUE)
    theirs <- system2(env_python, c("-c", shQuote(purelib)), stdout = TRUE)
    writeLines(ours, file.path(theirs, "development-packages.pth"))
  }
  env_python
}
