# `make test`: the testthat suite once per backend, each in its own R
# process, pytest for the Python module once per backend, and the Python
# requirements on every platform; then one line of totals. The runs are
# independent processes, so they run side by side, TEST_JOBS at a time, the
# longest first; each run's output is printed whole when it ends, with how
# long it took. By default as many at a time as the machine has cores (on
# 2026-12-07, 2 cores: 12:20-12:41 two at a time, 12:48 three; JAX's
# differential test 135-191 s two at a time, 258 s three; tests/README.md).
# With CI=true a skipped test fails the run: a backend that can't run is a
# failure there, never a pass.
# Usage: Rscript tools/run-tests.R tensorflow jax torch
backends <- commandArgs(trailingOnly = TRUE)
# The development Python, chosen by the Makefile (RETICULATE_PYTHON).
python <- Sys.getenv("RETICULATE_PYTHON", ".setup/venv/bin/python")
ci <- identical(Sys.getenv("CI"), "true")
jobs <- as.integer(Sys.getenv(
  "TEST_JOBS",
  max(parallel::detectCores(), 1L, na.rm = TRUE) # NA: unknown
))
if (is.na(jobs) || jobs < 1L) {
  stop(
    "TEST_JOBS must be a positive whole number, not '",
    Sys.getenv("TEST_JOBS"),
    "'."
  )
}

# Counts (passed, failed, skipped) from a file of three numbers that a run
# writes; a run that died before writing it counts as one failure.
counts_in <- function(file) {
  if (file.exists(file)) scan(file, quiet = TRUE) else c(0, 1, 0)
}

# Counts from pytest's JUnit report.
junit_counts <- function(file) {
  if (!file.exists(file)) {
    return(c(0, 1, 0)) # no report: pytest did not run
  }
  suite <- xml2::xml_find_first(xml2::read_xml(file), "//testsuite")
  n <- function(name) as.numeric(xml2::xml_attr(suite, name))
  failed <- n("failures") + n("errors")
  c(n("tests") - failed - n("skipped"), failed, n("skipped"))
}

# One run: what it is, the command, its environment, and the file its
# counts are read from (with `read`) once it has ended.
run <- function(
  what,
  command,
  args,
  env = character(),
  file,
  read = counts_in
) {
  list(
    what = what,
    command = command,
    args = args,
    env = env,
    file = file,
    read = read
  )
}

runs <- list()
for (backend in backends) {
  counts_file <- tempfile()
  runs[[length(runs) + 1L]] <- run(
    paste("testthat", backend),
    "Rscript",
    c(
      "tools/test-backend.R",
      backend,
      counts_file,
      if (backend == backends[[1]]) "once" # test-*-once.R files
    ),
    c(KERAS_BACKEND = backend),
    counts_file
  )
}
for (backend in backends) {
  junit <- tempfile(fileext = ".xml")
  runs[[length(runs) + 1L]] <- run(
    paste("pytest", backend),
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
    c(KERAS_BACKEND = backend),
    junit,
    junit_counts
  )
}
# customgrad's Python requirements against the package index, for every
# platform and Python in its range (tools/check-platforms.R); needs uv (the
# Makefile passes it in UV) and the index.
platforms_file <- tempfile()
runs[[length(runs) + 1L]] <- run(
  "platforms",
  "Rscript",
  c("tools/check-platforms.R", Sys.getenv("UV", "uv"), platforms_file),
  file = platforms_file
)

start <- function(run) {
  run$log <- tempfile(fileext = ".log")
  run$started <- Sys.time()
  run$process <- processx::process$new(
    run$command,
    run$args,
    # "current" alone would start it with an empty environment.
    env = if (length(run$env) > 0) c("current", run$env),
    stdout = run$log,
    stderr = "2>&1",
    cleanup_tree = TRUE
  )
  run
}

# Minutes and seconds since `from`, as "m:ss".
since <- function(from) {
  seconds <- floor(as.numeric(Sys.time() - from, units = "secs"))
  sprintf("%d:%02d", as.integer(seconds %/% 60), as.integer(seconds %% 60))
}

totals <- c(passed = 0, failed = 0, skipped = 0)
failures <- character() # what each failed run printed last, for the end
finish <- function(run) {
  cat(sprintf("\n== %s (%s) ==\n", run$what, since(run$started)))
  log <- readLines(run$log, warn = FALSE)
  writeLines(log)
  counts <- run$read(run$file)
  if (run$process$get_exit_status() != 0 && counts[[2]] == 0) {
    counts[[2]] <- 1
  }
  cat(sprintf(
    "-- %s: %d passed, %d failed, %d skipped\n",
    run$what,
    counts[[1]],
    counts[[2]],
    counts[[3]]
  ))
  totals <<- totals + counts
  if (counts[[2]] > 0) {
    # CI shows the end of the output only: repeat there how the run ended
    # (a negative status is the signal that killed it) and its last lines.
    status <- run$process$get_exit_status()
    failures <<- c(
      failures,
      sprintf(
        "\n== failed: %s (exit status %s%s), its last lines ==",
        run$what,
        status,
        if (!file.exists(run$file)) ", ended before writing its counts" else ""
      ),
      utils::tail(log, 60)
    )
  }
}

# The runs in the order above (the testthat suites are the longest), at
# most `jobs` at a time.
started <- Sys.time()
waiting <- runs
running <- list()
while (length(waiting) > 0 || length(running) > 0) {
  while (length(running) < jobs && length(waiting) > 0) {
    cat(sprintf("-- started %s\n", waiting[[1]]$what))
    running[[length(running) + 1L]] <- start(waiting[[1]])
    waiting <- waiting[-1]
  }
  processx::poll(lapply(running, function(r) r$process), 1000)
  ended <- vapply(running, function(r) !r$process$is_alive(), logical(1))
  for (r in running[ended]) {
    r$process$wait()
    finish(r)
  }
  running <- running[!ended]
}

writeLines(failures)
cat(sprintf(
  "\n%d passed, %d failed, %d skipped (%d runs, %d at a time, %s)\n",
  totals[["passed"]],
  totals[["failed"]],
  totals[["skipped"]],
  length(runs),
  jobs,
  since(started)
))
if (totals[["failed"]] > 0 || (ci && totals[["skipped"]] > 0)) {
  if (ci && totals[["skipped"]] > 0) {
    cat("CI=true: skipped tests count as failures.\n")
  }
  quit(status = 1)
}
