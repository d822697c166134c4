# One backend's soak for `make soak` (tools/soak.R): eager forward+backward
# steps of the naive log1pexp (tests/testthat/eager-loop.R) on n = 1,000
# elements, through the backend's own gradient and through op_grad().
# Measures after a full collection at step 2,000 (when caches and
# allocators have settled) and at the end, and writes one row per route to
# RESULT_FILE.
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
source("tests/testthat/helper-host.R")
py_gc <- reticulate::import("gc", convert = FALSE)

# The resident set, R's live objects (memory.profile() counts every
# reachable one, preserved ones included), Python's objects tracked by its
# collector, and customgrad's grad callbacks waiting for a backward pass.
measure <- function() {
  # R's collection first: it drops R's references to the tensors R's
  # callbacks made (torch's graph of a step is freed with them). Then
  # Python's: the grad callbacks it drops are released in R by customgrad's
  # own collection (otherwise at the next call into R). In the other order
  # torch's last steps of fit() counted as kept grads (24, run of
  # 2026-12-02) that the next R collection releases.
  gc()
  py_gc$collect()
  customgrad:::collect_garbage()
  gc()
  gc()
  c(
    rss_mb = process_mb(),
    r_objects = sum(memory.profile()),
    python_objects = reticulate::py_len(py_gc$get_objects()),
    pending_grads = utils::numhash(customgrad:::the$grads)
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
# `steps` calls of step(i), measured at step `settled` and at the end: the
# route's row of growth in `rows`. Returns the last call's value.
soak <- function(route, step) {
  started <- Sys.time()
  for (i in seq_len(steps)) {
    value <- step(i)
    if (i == settled) {
      at_settled <- measure()
    }
    if (i %% settled == 0) {
      progress(route, i, started)
    }
  }
  growth <- measure() - at_settled
  rows[[route]] <<- data.frame(
    backend = backend,
    route = route,
    steps = steps,
    rbind(growth),
    seconds = as.numeric(Sys.time() - started, units = "secs")
  )
  value
}
for (route in c("native", "op_grad")) {
  step <- eager_step(log1pexp, x, route)
  grad <- soak(route, function(i) step())
  # The last gradient is right: the loop computed, not just ran.
  stopifnot(max(abs(as.array(grad) - stats::plogis(as.array(x)))) < 1e-5)
}

# An R host op in a model (issue 59): 20,000 steps of fit() (batches of 1,
# Keras' default compilation; on TensorFlow the model's steps served:
# serve_host_ops(), which layer_custom_gradient() calls on a Sequential
# model) and 20,000 forward-only predict() calls, with the op and without
# it (plain-predict), measured as above. R's besselK() and its
# gradient keep what they read until the backward pass; nothing may
# outlive it (bessel_k() and host_model(): tests/testthat/helper-host.R).
model <- host_model(bessel_k())
model |> compile(optimizer = optimizer_adam(0.01), loss = "mse")
plain <- keras_model_sequential(input_shape = 1) |>
  layer_dense(1, use_bias = FALSE, kernel_initializer = "ones")
plain |> compile(optimizer = "adam", loss = "mse")
set.seed(1)
fit_x <- matrix(runif(settled, 0.5, 2), ncol = 1)
fit_y <- besselK(1.3 * fit_x, 1.5)
host_steps <- list(
  "host-fit" = function(i) {
    # One epoch is `settled` steps: fit() runs once per epoch's worth.
    if (i %% settled == 1L || settled == 1L) {
      fit(model, fit_x, fit_y, epochs = 1, batch_size = 1, verbose = 0)
    }
  },
  "host-predict" = function(i) {
    predict(model, fit_x[1:8, , drop = FALSE], verbose = 0)
  },
  # The same predict() without the host op: what the backend's own
  # predict() keeps (TensorFlow's eager one grows too, run 4 of
  # bench/results/soak-2026-12-02.txt).
  "plain-predict" = function(i) {
    predict(plain, fit_x[1:8, , drop = FALSE], verbose = 0)
  }
)
for (route in names(host_steps)) {
  soak(route, host_steps[[route]])
}
# The weight was learnt through R's gradient: the loop computed.
stopifnot(abs(as.vector(as.array(model$weights[[1]])) - 1.3) < 0.01)
utils::write.csv(do.call(rbind, rows), result_file, row.names = FALSE)
