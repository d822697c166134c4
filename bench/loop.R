# An eager loop of customgrad steps in its own R process (bench-backend.R
# runs it, and reference.py's eager_loop_peak() for Python): the README's
# log1pexp, `steps` gradients of sum(log1pexp(x)) on n float32 elements,
# the loop holding each step's gradient as users write it
# (tests/testthat/eager-loop.R routes "native" and "op_grad").
# Prints one line: the peak resident memory above the resident set after
# three steps on 4 elements (imports, traces), in MB; seconds per step;
# R's collections during the loop by level (0, 1, 2 = full), counted from
# R's own report (gcinfo()); the seconds R spent collecting (gc.time()); the
# collections customgrad asked for (all, full); and the seconds those took,
# the finalizers they ran included (the release of the Python objects R
# held, which gc.time() leaves out).
# Usage: KERAS_BACKEND=torch Rscript bench/loop.R N STEPS ROUTE [WARMUP]
args <- commandArgs(trailingOnly = TRUE)
n <- as.numeric(args[[1]])
steps <- as.integer(args[[2]])
route <- args[[3]]
warmup <- if (length(args) >= 4) as.integer(args[[4]]) else 0L
suppressPackageStartupMessages({
  library(keras3)
  library(customgrad)
})
source("tests/testthat/eager-loop.R")
log1pexp <- readme_log1pexp()
step <- eager_step(log1pexp, op_ones(4) * 0.5, route)
for (i in 1:3) {
  step()
}
memory <- reticulate::import("customgrad._memory")
base <- process_mb("VmRSS")
step <- eager_step(log1pexp, op_ones(n) * 0.5, route)
for (i in seq_len(warmup)) {
  grad <- step()
}
asked <- memory$stats()
log <- tempfile()
con <- file(log, open = "wt")
sink(con, type = "message")
invisible(gcinfo(TRUE))
gc_seconds <- gc.time()[[3]]
started <- Sys.time()
for (i in seq_len(steps)) {
  grad <- step()
}
seconds <- as.numeric(Sys.time() - started, units = "secs")
gc_seconds <- gc.time()[[3]] - gc_seconds
invisible(gcinfo(FALSE))
sink(type = "message")
close(con)
lines <- readLines(log)
levels <- regmatches(lines, regexpr("level [0-2]", lines))
count <- function(l) sum(levels == paste("level", l))
now <- memory$stats()
cat(sprintf(
  "%.1f %.6f %d %d %d %.4f %d %d %.4f\n",
  process_mb("VmHWM") - base,
  seconds / steps,
  count(0),
  count(1),
  count(2),
  gc_seconds,
  now$collections - asked$collections,
  now$full_collections - asked$full_collections,
  now$seconds - asked$seconds
))
