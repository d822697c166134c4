# `make soak`: 20,000 eager forward+backward steps per backend and route,
# each backend in its own R process (tools/soak-backend.R), then a table of
# growth between step 2,000 and the end, checked against the bounds below;
# then the tests in tests/soak (user interrupts sent seconds apart) once
# per backend, each in its own R process. Not part of `make test`: it takes
# minutes per backend and depends on timing.
# Usage: Rscript tools/soak.R tensorflow jax torch
backends <- commandArgs(trailingOnly = TRUE)
steps <- as.integer(Sys.getenv("CUSTOMGRAD_SOAK_STEPS", "20000"))

# Growth allowed from step 2,000 to the end. One leaked object per step
# would be 18,000; the allowances cover caches that fill once.
bounds <- c(
  rss_mb = 20,
  r_objects = 1000,
  python_objects = 1000,
  pending_grads = 1
)

results <- list()
for (backend in backends) {
  cat(sprintf("\n== soak on %s ==\n", backend))
  result_file <- tempfile(fileext = ".csv")
  status <- system2(
    "Rscript",
    c("tools/soak-backend.R", backend, result_file, steps),
    env = paste0("KERAS_BACKEND=", backend)
  )
  if (status != 0 || !file.exists(result_file)) {
    results[[backend]] <- data.frame(
      backend = backend,
      route = "(failed)",
      steps = steps,
      rbind(bounds * NA),
      seconds = NA
    )
    next
  }
  results[[backend]] <- utils::read.csv(result_file)
}

table <- do.call(rbind, results)
within <- apply(
  table[names(bounds)],
  1,
  function(growth) !anyNA(growth) && all(growth < bounds)
)
# plain-predict has no customgrad in it: the backend's own growth, shown
# beside host-predict, not bounded.
within[table$route %in% "plain-predict"] <- NA
table$within_bounds <- within
cat("\nGrowth from step", steps %/% 10, "to step", steps, "\n")
print(table, row.names = FALSE, digits = 3)
cat(
  "Bounds:",
  paste(names(bounds), "<", bounds, collapse = ", "),
  "\n"
)

failed_suites <- character()
for (backend in backends) {
  cat(sprintf("\n== tests/soak on %s ==\n", backend))
  status <- system2(
    "Rscript",
    c(
      "-e",
      shQuote(paste0(
        "testthat::test_dir('tests/soak', package = 'customgrad', ",
        "load_package = 'installed', stop_on_failure = TRUE)"
      ))
    ),
    env = paste0("KERAS_BACKEND=", backend)
  )
  if (status != 0) {
    failed_suites <- c(failed_suites, backend)
  }
}
if (length(failed_suites) > 0) {
  cat("tests/soak failed on:", paste(failed_suites, collapse = ", "), "\n")
}
if (!all(within, na.rm = TRUE) || length(failed_suites) > 0) {
  quit(status = 1)
}
