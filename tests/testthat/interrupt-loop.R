# Sourced in the child R sessions of the SIGINT tests (helper-interrupts.R).

# `step()` again and again for `seconds`, catching interrupts. Returns how
# many steps finished, how many interrupts were caught, and how many errors
# with which messages (reticulate reports an interrupt that lands in its
# own lookup of a Python class as an error).
caught_interrupts <- function(step, seconds) {
  caught <- 0
  errors <- character()
  steps <- 0
  started <- Sys.time()
  while (as.numeric(Sys.time() - started, units = "secs") < seconds) {
    tryCatch(
      {
        step()
        steps <- steps + 1
      },
      interrupt = function(cnd) caught <<- caught + 1,
      error = function(cnd) errors <<- c(errors, conditionMessage(cnd))
    )
  }
  list(
    steps = steps,
    caught = caught,
    errors = length(errors),
    messages = unique(errors)
  )
}
