# Helpers of test-time-limits.R: the package tests' own helpers (skips,
# expectations, models), then busy R code that a time limit stops.
for (helper in list.files(
  test_path("..", "testthat"),
  "^helper-.*[.]R$",
  full.names = TRUE
)) {
  source(helper, local = TRUE)
}

# Busy R work for `seconds`, checking for interrupts as R code does.
busy <- function(seconds) {
  start <- Sys.time()
  while (Sys.time() - start < seconds) {
    NULL
  }
}

# R work in f or grad that an elapsed time limit, set here, stops: so the
# limit fires there, not at a random point of Keras' or reticulate's code
# (reticulate's event polling while Python runs prints one and goes on).
# It runs past the half second for which customgrad holds interrupts in a
# callback (10 times the limit), so R takes the limit inside it.
busy_past_time_limit <- function(limit = 0.2) {
  setTimeLimit(elapsed = limit, transient = FALSE)
  busy(10 * limit)
}

# The error of `expr`, with any time limit lifted afterwards.
error_at_time_limit <- function(expr) {
  on.exit(setTimeLimit(elapsed = Inf))
  tryCatch(expr, error = identity)
}
# Python, the backend and customgrad's module loaded, by a gradient of a
# throwaway function: a time limit that fires while reticulate starts
# Python is taken by reticulate as "no Python found".
warm_up <- function() {
  h <- op_custom_gradient(\(x) tuple(x * 2, \(upstream) upstream * 2))
  invisible(op_grad(h)(1))
}
