# Skip helpers. With CI=true a backend that can't run fails the test
# instead: in CI a skipped backend is a failure, never a pass.
skip_if_no_backend <- function() {
  if (backend_available()) {
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
