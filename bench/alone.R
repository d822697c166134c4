# Each implementation in its own loop, in one process: pure Python first,
# then customgrad, then the floor (see bench/README.md, Results: in the
# interleaved loop of `make bench`, customgrad's calls pay for R's
# collections of every implementation's garbage).
# Usage: KERAS_BACKEND=torch Rscript bench/alone.R 1e6
suppressPackageStartupMessages(library(customgrad))
n <- as.numeric(commandArgs(trailingOnly = TRUE)[[1]])
steps <- 300L
ref <- reticulate::import_from_path(
  "reference",
  path = "bench",
  convert = FALSE
)
py_call <- reticulate::py_call
log1pexp <- op_custom_gradient(\(x) {
  e <- op_exp(x)
  grad <- function(..., upstream = NULL) {
    upstream <- upstream %||% ..1
    op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
  }
  tuple(op_log(1 + e), grad)
})
floor_h <- local({
  py_log1pexp <- ref$log1pexp
  function(x) py_call(py_log1pexp, x)
})
x <- py_call(ref$make_input, n)
# The same harness as bench-backend.R's r_eager_step().
step <- if (config_backend() == "jax") {
  function(h) py_call(ref$jax_grad_step, h, x)
} else {
  function(h) {
    state <- py_call(ref$start, x)
    py_call(ref$finish, state, h(x), x)
  }
}
loop <- function(h) {
  for (i in 1:20) {
    step(h)
  }
  t <- numeric(steps)
  for (i in seq_len(steps)) {
    t0 <- Sys.time()
    step(h)
    t[[i]] <- as.numeric(Sys.time() - t0) * 1e6
  }
  stats::median(t)
}
python <- stats::median(replicate(
  steps,
  reticulate::py_to_r(py_call(ref$timed, ref$python_eager, x))
))
invisible(log1pexp(x)) # starts customgrad's Python module
memory <- reticulate::import("customgrad._memory")
before <- memory$stats()$collections
customgrad <- loop(log1pexp)
collections <- (memory$stats()$collections - before) / (steps + 20)
gc()
floor <- loop(floor_h)
cat(sprintf(
  "%s n=%g alone: python %.0f, floor %.0f, customgrad %.0f us; customgrad/python %.2f, customgrad/floor %.2f; collections per customgrad step %.3f\n",
  config_backend(),
  n,
  python,
  floor,
  customgrad,
  customgrad / python,
  customgrad / floor,
  collections
))
