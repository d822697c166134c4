# Skip helpers. With CI=true a backend that can't run fails the test
# instead: in CI a skipped backend is a failure, never a pass.
# Asked once per test process: each runs one backend, and where no Python
# is installed asking looks for one (conda, virtual environments), about
# 0.2 s each time.
backend_ready <- local({
  ready <- NULL
  function() {
    if (is.null(ready)) {
      ready <<- backend_available()
    }
    ready
  }
})

skip_if_no_backend <- function() {
  if (backend_ready()) {
    return(invisible(TRUE))
  }
  reason <- sprintf(
    "The %s backend is not available.",
    customgrad:::backend_name()
  )
  if (identical(Sys.getenv("CI"), "true")) {
    testthat::fail(paste(reason, "(CI=true: not skipped)"))
  }
  testthat::skip(reason)
}

skip_unless_backend <- function(backend) {
  skip_if_no_backend()
  if (!identical(customgrad:::backend_name(), backend)) {
    testthat::skip(sprintf("Only on %s.", backend))
  }
}

# Tests that start R in a subprocess (fresh session, other environment).
skip_if_no_callr <- function() {
  testthat::skip_if_not_installed("callr")
}

# A stand-in for reticulate's uv (RETICULATE_UV) in `dir` that only writes
# its arguments to the file `calls` and fails: a test that finds `calls`
# knows something tried to provision Python. A shell script, so not on
# Windows. Returns its path.
local_fake_uv <- function(dir, calls) {
  uv <- file.path(dir, "uv")
  writeLines(
    c("#!/bin/sh", sprintf("echo uv \"$@\" >> '%s'", calls), "exit 1"),
    uv
  )
  Sys.chmod(uv, "755")
  uv
}
