# `make test`: the testthat suite once per backend, each in its own R
# process, and pytest for the Python module once per backend; then one line
# of totals. With CI=true a skipped test fails the run: a backend that can't
# run is a failure there, never a pass.
# Usage: Rscript tools/run-tests.R tensorflow jax torch
backends <- commandArgs(trailingOnly = TRUE)
# The development Python, chosen by the Makefile (RETICULATE_PYTHON).
python <- Sys.getenv("RETICULATE_PYTHON", ".setup/venv/bin/python")
ci <- identical(Sys.getenv("CI"), "true")

totals <- c(passed = 0, failed = 0, skipped = 0)
add <- function(counts, what) {
  cat(sprintf(
    "-- %s: %d passed, %d failed, %d skipped\n",
    what,
    counts[[1]],
    counts[[2]],
    counts[[3]]
  ))
  totals <<- totals + counts
}

for (backend in backends) {
  counts_file <- tempfile()
  status <- system2(
    "Rscript",
    c(
      "tools/test-backend.R",
      backend,
      counts_file,
      if (backend == backends[[1]]) "once" # test-*-once.R files
    ),
    env = paste0("KERAS_BACKEND=", backend)
  )
  counts <- if (file.exists(counts_file)) {
    scan(counts_file, quiet = TRUE)
  } else {
    c(0, 1, 0) # the R process died: count it as a failure
  }
  if (status != 0 && counts[[2]] == 0) {
    counts[[2]] <- 1
  }
  add(counts, paste("testthat", backend))
}

for (backend in backends) {
  cat(sprintf("\n== pytest on %s ==\n", backend))
  junit <- tempfile(fileext = ".xml")
  system2(
    python,
    c(
      "-m",
      "pytest",
      "-q",
      "-p",
      "no:cacheprovider",
      "inst/python/tests",
      paste0("--junitxml=", junit)
    ),
    env = paste0("KERAS_BACKEND=", backend)
  )
  counts <- c(0, 1, 0) # no report: pytest did not run
  if (file.exists(junit)) {
    suite <- xml2::xml_find_first(xml2::read_xml(junit), "//testsuite")
    n <- function(name) as.numeric(xml2::xml_attr(suite, name))
    failed <- n("failures") + n("errors")
    counts <- c(n("tests") - failed - n("skipped"), failed, n("skipped"))
  }
  add(counts, paste("pytest", backend))
}

# customgrad's Python requirements against the package index, for every
# platform and Python in its range (tools/check-platforms.R); needs uv (the
# Makefile passes it in UV) and the index.
cat("\n== Python requirements on every platform ==\n")
counts_file <- tempfile()
system2(
  "Rscript",
  c("tools/check-platforms.R", shQuote(Sys.getenv("UV", "uv")), counts_file)
)
counts <- if (file.exists(counts_file)) {
  scan(counts_file, quiet = TRUE)
} else {
  c(0, 1, 0)
}
add(counts, "platforms")

cat(sprintf(
  "\n%d passed, %d failed, %d skipped\n",
  totals[["passed"]],
  totals[["failed"]],
  totals[["skipped"]]
))
if (totals[["failed"]] > 0 || (ci && totals[["skipped"]] > 0)) {
  if (ci && totals[["skipped"]] > 0) {
    cat("CI=true: skipped tests count as failures.\n")
  }
  quit(status = 1)
}
