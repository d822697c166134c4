# One backend's soak for `make soak` (tools/soak.R): eager forward+backward
# steps of the naive log1pexp (tests/testthat/eager-loop.R) on n = 1,000
# elements, through the backend's own gradient and through op_grad().
# Measures after a full collection at step 2,000 (when caches and
# allocators have settled) and at the end, and writes one row per route to RESULT_FILE.
# Usage: Rscript tools/soak-backend.R BACKEND RESULT_FILE [STEPS]
args <- commandArgs(trailingOnly = TRUE)
backend <- args[[1]]
result_file <- args[[2]]
steps <- if (length(args) >= 3) as.integer(args[[3]]) else 20000L
settled <- steps %/% 10
Sys.setenv(KERAS_BACKEND = backend)
suppressPackageStartupMessages({
  library(keras3)
  library(customgrad)
})
source("tests/testthat/eager-loop.R")
py_gc <- reticulate::import("gc", convert = FALSE)

# The resident set, R's live objects (memory.profile() counts every
# reachable one, preserved ones included), Python's objects tracked by its
# collector, and customgrad's grad callbacks waiting for a backward pass.
measure <- function() {
  gc()
  gc()
  py_gc$collect()
  c(
    rss_mb = process_mb(),
    r_objects = sum(memory.profile()),
    python_objects = reticulate::py_len(py_gc$get_objects()),
    pending_grads = length(customgrad:::the$grads)
  )
}

progress <- function(route, i, started) {
  cat(sprintf(
    "%s %-7s step %5d: %.0f MB, %.0f s\n",
    backend,
    route,
    i,
    process_mb(),
    as.numeric(Sys.time() - started, units = "secs")
  ))
}

log1pexp <- naive_log1pexp()
x <- op_convert_to_tensor(seq(-3, 3, length.out = 1000), dtype = "float32")
# What measure(), progress() and the final check load, loaded before the
# first measure.
invisible(measure())
progress("warm-up", 0, Sys.time())
invisible(as.array(x))
rows <- list()
for (route in c("native", "op_grad")) {
  step <- eager_step(log1pexp, x, route)
  started <- Sys.time()
  for (i in seq_len(steps)) {
    grad <- step()
    if (i == settled) {
      at_settled <- measure()
    }
    if (i %% settled == 0) {
      progress(route, i, started)
    }
  }
  growth <- measure() - at_settled
  seconds <- as.numeric(Sys.time() - started, units = "secs")
  # The last gradient is right: the loop computed, not just ran.
  expected <- stats::plogis(as.array(x))
  stopifnot(max(abs(as.array(grad) - expected)) < 1e-5)
  rows[[route]] <- data.frame(
    backend = backend,
    route = route,
    steps = steps,
    rbind(growth),
    seconds = seconds
  )
}
utils::write.csv(do.call(rbind, rows), result_file, row.names = FALSE)
