# `make coverage`: covr's line coverage of R/ by the testthat suite, and
# pytest-cov's of inst/python/customgrad by the pytest suite, on each backend
# given (default TensorFlow) and combined; then one line of totals.
#
# The testthat suite runs as in `make test` (tools/test-backend.R, one R
# process per backend) against the package as covr instruments it: every R
# process that loads it (callr's fresh sessions in the tests too) leaves its
# counts, and covr adds them up. Python coverage is the pytest suite's
# only (not the Python that the R tests run).
# Usage: Rscript tools/coverage.R tensorflow [jax torch]
backends <- commandArgs(trailingOnly = TRUE)
if (length(backends) == 0) {
  backends <- "tensorflow"
}
# The development Python, chosen by the Makefile (RETICULATE_PYTHON).
python <- Sys.getenv("RETICULATE_PYTHON", ".setup/venv/bin/python")
# The suites' output, and the data behind the numbers, stay here.
logs <- file.path(".setup", "coverage")
dir.create(logs, recursive = TRUE, showWarnings = FALSE)

# --- R: covr ------------------------------------------------------------------

# The commands covr runs (in an R process of its own, in this directory):
# the suite once per backend, its output to a log, its counts to a file.
run_suite <- function(backend) {
  log <- file.path(logs, paste0("testthat-", backend, ".log"))
  counts <- file.path(logs, paste0("testthat-", backend, ".counts"))
  deparse1(bquote(
    system2(
      "Rscript",
      c("tools/test-backend.R", .(backend), .(counts)),
      env = .(paste0("KERAS_BACKEND=", backend)),
      stdout = .(log),
      stderr = .(log)
    )
  ))
}
cat(sprintf(
  "== covr: the testthat suite on %s (minutes; logs in %s) ==\n",
  paste(backends, collapse = ", "),
  logs
))
r_coverage <- covr::package_coverage(
  type = "none",
  code = vapply(backends, run_suite, "")
)
for (backend in backends) {
  counts <- file.path(logs, paste0("testthat-", backend, ".counts"))
  counts <- if (file.exists(counts)) scan(counts, quiet = TRUE) else NA
  cat(sprintf(
    "-- testthat %s: %s passed, %s failed, %s skipped\n",
    backend,
    counts[1],
    counts[2],
    counts[3]
  ))
}
print(r_coverage, group = "filename")
r_percent <- covr::percent_coverage(r_coverage)

# --- Python: pytest-cov -------------------------------------------------------

data_file <- file.path(logs, ".coverage")
unlink(data_file)
for (backend in backends) {
  cat(sprintf("\n== pytest-cov: the pytest suite on %s ==\n", backend))
  system2(
    python,
    c(
      "-m",
      "pytest",
      "-q",
      "-p",
      "no:cacheprovider",
      "--cov=inst/python/customgrad",
      "--cov-append",
      "--cov-report=",
      "inst/python/tests"
    ),
    env = c(
      paste0("KERAS_BACKEND=", backend),
      paste0("COVERAGE_FILE=", data_file)
    )
  )
}
cat("\n")
env <- paste0("COVERAGE_FILE=", data_file)
system2(python, c("-m", "coverage", "report"), env = env)
json <- file.path(logs, "python-coverage.json")
system2(python, c("-m", "coverage", "json", "-q", "-o", json), env = env)
py_percent <- if (file.exists(json)) {
  jsonlite::fromJSON(json)$totals$percent_covered
} else {
  NA
}

cat(sprintf(
  "\nCoverage on %s: R %.1f%% (covr), Python %.1f%% (pytest-cov)\n",
  paste(backends, collapse = " + "),
  r_percent,
  py_percent
))
