# `make cran-check`: R CMD check --as-cran of the release tarball (its
# vignettes built where the backends are) as CRAN's machines run it: no
# Python chosen, a fresh HOME, NOT_CRAN and CI unset (the Makefile starts
# this script so), downloads refused by a proxy that isn't there, and
# reticulate's uv replaced by one that only logs its calls. Fails on any
# ERROR, WARNING or NOTE not accepted, on any attempt to provision Python or
# download, and on a test step of 20 s or more; prints the status, the
# time and the number of tests skipped.
# With --python=PATH, the same with that Python chosen (RETICULATE_PYTHON),
# one with Keras and the JAX backend only: Keras' default backend,
# TensorFlow, is not there, so the tests that need it skip as cleanly.
# Usage: Rscript tools/cran-check.R [--python=PATH] TARBALL [ALLOWED_NOTE ...]
args <- commandArgs(trailingOnly = TRUE)
python <- sub("^--python=", "", grep("^--python=", args, value = TRUE))
args <- grep("^--python=", args, value = TRUE, invert = TRUE)
tarball <- normalizePath(args[[1]])
allowed <- args[-1]
stopifnot(
  "run through `make cran-check`: RETICULATE_PYTHON must be unset" = is.na(
    Sys.getenv("RETICULATE_PYTHON", NA)
  )
)
python_env <- if (length(python)) c(RETICULATE_PYTHON = python)
label <- if (length(python)) sprintf(" (Python %s)", python) else " (no Python)"

home <- tempfile("cran-home-")
dir.create(home)
uv_log <- file.path(home, "uv-calls.log")
fake_uv <- file.path(home, "uv")
writeLines(
  c("#!/bin/sh", sprintf("echo \"$@\" >> '%s'", uv_log), "exit 1"),
  fake_uv
)
Sys.chmod(fake_uv, "755")
nowhere <- "http://127.0.0.1:9"

started <- Sys.time()
result <- rcmdcheck::rcmdcheck(
  tarball,
  # --no-manual: the PDF manual needs LaTeX (see tools/check.R).
  args = c("--as-cran", "--no-manual"),
  check_dir = if (length(python)) "check-cran-python" else "check-cran",
  error_on = "never",
  env = c(
    python_env,
    HOME = home,
    R_USER_DATA_DIR = home,
    R_USER_CACHE_DIR = home,
    RETICULATE_UV = fake_uv,
    http_proxy = nowhere,
    https_proxy = nowhere,
    HTTP_PROXY = nowhere,
    HTTPS_PROXY = nowhere,
    "_R_CHECK_CRAN_INCOMING_" = "false",
    "_R_CHECK_CRAN_INCOMING_REMOTE_" = "false",
    "_R_CHECK_SYSTEM_CLOCK_" = "false",
    # Report every step's time, the tests' included.
    "_R_CHECK_TIMINGS_" = "0"
  )
)
seconds <- as.numeric(Sys.time() - started, units = "secs")

# The tests' time: their output ends with R's proc.time() (R CMD check
# prints its own timing only for long steps).
tests_out <- strsplit(result$test_output$testthat, "\n")[[1]]
timing <- grep("^ *[0-9.]+ +[0-9.]+ +[0-9.]+ *$", tests_out, value = TRUE)
test_seconds <- if (length(timing)) {
  as.numeric(strsplit(trimws(timing[[length(timing)]]), " +")[[1]][[3]])
} else {
  NA_real_
}
summary_line <- regmatches(
  result$test_output$testthat,
  regexpr(
    "\\[ FAIL [0-9]+ \\| WARN [0-9]+ \\| SKIP [0-9]+ \\| PASS [0-9]+ \\]",
    result$test_output$testthat
  )
)
skipped <- as.integer(sub(".*SKIP ([0-9]+).*", "\\1", summary_line))
uv_calls <- if (file.exists(uv_log)) readLines(uv_log) else character()

accepted <- vapply(
  result$notes,
  function(note) any(vapply(allowed, grepl, TRUE, x = note)),
  TRUE
)
problems <- c(result$errors, result$warnings, result$notes[!accepted])
cat(sprintf(
  paste0(
    "\nCRAN-like check%s: %d error(s), %d warning(s), %d note(s) (%d accepted)",
    " in %.0f s; tests %s s, %s\n",
    "Provisioning or download attempts (uv calls): %d\n"
  ),
  label,
  length(result$errors),
  length(result$warnings),
  length(result$notes),
  sum(accepted),
  seconds,
  format(test_seconds),
  if (length(summary_line)) summary_line else "(no testthat summary)",
  length(uv_calls)
))
if (length(uv_calls) > 0) {
  cat("uv was called:\n", paste0("  uv ", uv_calls, "\n"), sep = "")
}
failed <- length(problems) > 0 ||
  length(uv_calls) > 0 ||
  is.na(test_seconds) ||
  test_seconds >= 20 ||
  !length(skipped)
if (length(problems) > 0) {
  cat("\nR CMD check problems:\n", paste0(problems, "\n"), sep = "")
}
if (failed) {
  quit(status = 1)
}
cat(sprintf("CRAN-like check%s: clean\n", label))
