# `make distributed-demo`: the example of a data-parallel run
# (inst/examples/distributed-train.R) as PROCESSES local R processes on JAX,
# each training on its shard of every global batch, and once alone on the
# combined batches. Every process must end with the same weights, and those
# must match the run alone within float32 tolerance.
# Usage: Rscript tools/distributed-demo.R [PROCESSES] [STEPS]
args <- commandArgs(trailingOnly = TRUE)
processes <- if (length(args) >= 1) as.integer(args[[1]]) else 2L
steps <- if (length(args) >= 2) as.integer(args[[2]]) else 40L

# The launcher the tests use (run_distributed_example()).
source("tests/testthat/helper-distributed.R")

cat(sprintf(
  "Launching %d R processes (JAX, data-parallel, %d steps) and one alone...\n",
  processes,
  steps
))
started <- Sys.time()
run <- run_distributed_example(steps, processes)
cat(
  grep("^process ", unlist(strsplit(run$output, "\n")), value = TRUE),
  sep = "\n"
)

agree <- vapply(
  run$processes,
  function(w) identical(w, run$processes[[1]]),
  logical(1)
)
difference <- max(abs(run$processes[[1]] - run$alone))
cat(sprintf(
  "%d weights; processes agree: %s; largest difference from the run alone: %.2g (tolerance 1e-5); %.0f s\n",
  length(run$alone),
  if (all(agree)) "yes" else "NO",
  difference,
  as.numeric(Sys.time() - started, units = "secs")
))
if (!all(agree) || difference > 1e-5) {
  stop("The distributed run disagrees.")
}
