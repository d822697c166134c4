# What bench/loop.R and bench/host.R share: the line bench/run.R reads
# (reference.py's report()), a loop timed whole and per step, and keras3's
# fit() timed whole.

report <- function(total, times, steps, ...) {
  times <- sort(times)
  pct <- function(p) times[[min(length(times), floor(p * length(times)) + 1)]]
  values <- c(
    mean_us = total / steps * 1e6,
    median_us = pct(0.5) * 1e6,
    p10_us = pct(0.1) * 1e6,
    p90_us = pct(0.9) * 1e6,
    ...
  )
  cat(paste0(names(values), "=", signif(values, 6), collapse = " "), "\n")
}

# `steps` calls of step(), timed whole and each by bench::mark() (every
# step kept), reported with `...` (evaluated after the loop).
time_steps <- function(step, steps, ...) {
  started <- Sys.time()
  marks <- bench::mark(
    step(),
    iterations = steps,
    check = FALSE,
    memory = FALSE,
    filter_gc = FALSE
  )
  total <- as.numeric(Sys.time() - started, units = "secs")
  report(total, as.numeric(marks$time[[1]]), steps, ...)
}

# fit() of `model` on `data` (x, y) for `epochs`, reported per step; keras3's
# fit() gives no per-epoch times: the whole fit is the number.
report_fit <- function(model, data, epochs, samples, batch) {
  started <- Sys.time()
  history <- fit(
    model,
    data[[1]],
    data[[2]],
    epochs = epochs,
    batch_size = batch,
    shuffle = FALSE,
    verbose = 0
  )
  total <- as.numeric(Sys.time() - started, units = "secs")
  steps <- epochs * ceiling(samples / batch)
  report(
    total,
    total / steps,
    steps,
    loss = utils::tail(history$metrics$loss, 1)
  )
}
