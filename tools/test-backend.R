# Runs the testthat suite against the installed package on one backend (the
# backend is fixed per R process) and writes the counts to a file; with
# "once", also the files that run in one backend's process only.
# Usage: Rscript tools/test-backend.R BACKEND COUNTS_FILE [once]
args <- commandArgs(trailingOnly = TRUE)
backend <- args[[1]]
counts_file <- args[[2]]
once <- identical(args[3], "once")
Sys.setenv(KERAS_BACKEND = backend, NOT_CRAN = "true")
cat(sprintf("\n== testthat on %s ==\n", backend))
# Files named test-*-<backend>.R hold tests of one backend's own conventions:
# run only this backend's, so that no test is skipped for being elsewhere.
# Files named test-*-once.R test what is the same on every backend, each
# backend's included (which Python is used, customgrad_config()'s probes of
# all three): run in the first backend's process only.
others <- setdiff(c("tensorflow", "jax", "torch"), backend)
excluded <- c(others, if (!once) "once")
results <- testthat::test_dir(
  "tests/testthat",
  filter = sprintf("-(%s)$", paste(excluded, collapse = "|")),
  invert = TRUE,
  package = "customgrad",
  load_package = "installed",
  reporter = testthat::ProgressReporter$new(show_praise = FALSE),
  stop_on_failure = FALSE
)
df <- as.data.frame(results)
failed <- df$failed > 0 | df$error
skipped <- !failed & df$skipped
passed <- !failed & !skipped
writeLines(
  sprintf("%d %d %d", sum(passed), sum(failed), sum(skipped)),
  counts_file
)
