# One R loop of `make bench` (bench/run.R), alone in this process and
# timed whole (every collection and finalizer inside): steps of
# sum(log1pexp(x)) on N float32 elements through the backend's own gradient
# ("native", tests/testthat/eager-loop.R), op_grad() ("op_grad"), or the
# native harness around reference.py's Python log1pexp ("floor"); or keras3's
# fit() of reference.py's MLP ("fit"). Prints what reference.py's report()
# prints; bench::mark() times each step, every step kept. "pystep": the
# floor of op_grad() (the issue "customgrad's own cost per call"): the
# R loop calling reference.py's whole step, written in Python, once a step.
# With `fresh`, no warm-up at n = 1: the memory reported is the peak above
# the loop's start in a fresh process.
# Usage: KERAS_BACKEND=jax Rscript bench/loop.R ROUTE N STEPS [eager | fresh]
#        | fit EPOCHS [customgrad | floor]   (floor: reference.py's log1pexp)
args <- commandArgs(trailingOnly = TRUE)
route <- args[[1]]
suppressPackageStartupMessages({
  library(keras3)
  library(customgrad)
})
source("tests/testthat/eager-loop.R")
source("bench/report.R")
# reference.py's MLP, data and log1pexp, and peak_mb() (NaN without /proc).
ref <- reticulate::import_from_path("reference", "bench")

if (route == "fit") {
  epochs <- as.integer(args[[2]])
  data <- ref$fit_data()
  activation <- if (identical(args[3], "floor")) {
    ref$log1pexp
  } else {
    naive_log1pexp()
  }
  model <- ref$make_mlp(activation)
  report_fit(model, data, epochs, ref$FIT_SAMPLES, ref$FIT_BATCH)
  quit(save = "no")
}

n <- as.numeric(args[[2]])
steps <- as.integer(args[[3]])
f <- if (route == "floor") ref$log1pexp else naive_log1pexp()
eager <- if (route == "floor") "native" else route
make_step <- function(x) {
  if (route != "pystep") {
    return(eager_step(f, x, eager))
  }
  python_step <- ref$eager_step(x)
  function() python_step()
}
# At n > 1, 20 steps at one element first, as reference.py does: the
# memory reported is the peak above this process's own peak there. At
# n = 1 the timed loop is the first: its first step's trace is timed.
if (n > 1 && !identical(args[4], "fresh")) {
  small <- make_step(op_ones(1) * 0.5)
  for (i in 1:20) {
    small()
  }
}
base <- ref$peak_mb()
step <- make_step(op_ones(n) * 0.5)
time_steps(step, steps, extra_mb = ref$peak_mb() - base)
