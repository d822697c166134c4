# Runs the testthat suite against the installed package on one backend (the
# backend is fixed per R process) and writes the counts to a file.
# Usage: Rscript tools/test-backend.R BACKEND COUNTS_FILE
args <- commandArgs(trailingOnly = TRUE)
backend <- args[[1]]
counts_file <- args[[2]]
Sys.setenv(KERAS_BACKEND = backend, NOT_CRAN = "true")
cat(sprintf("\n== testthat on %s ==\n", backend))
# Files named test-*-<backend>.R hold tests of one backend's own conventions:
# run only this backend's, so that no test is skipped for being elsewhere.
others <- setdiff(c("tensorflow", "jax", "torch"), backend)
results <- testthat::test_dir(
  "tests/testthat",
  filter = sprintf("-(%s)$", paste(others, collapse = "|")),
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
