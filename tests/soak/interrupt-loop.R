# Sourced in the child R sessions of the SIGINT tests (helper-interrupts.R).

# `step(made)` again and again for `seconds`, catching interrupts. Returns
# how many steps finished, how many interrupts were caught, and how many
# errors with which messages (reticulate reports an interrupt that lands
# in its own lookup of a Python class as an error); what an interrupted
# step passed to `made()` is kept in `interrupted`, for checks afterwards.
caught_interrupts <- function(step, seconds) {
  interrupted <<- list()
  caught <- 0
  errors <- character()
  steps <- 0
  started <- Sys.time()
  while (as.numeric(Sys.time() - started, units = "secs") < seconds) {
    made <- NULL
    tryCatch(
      {
        step(function(x) made <<- x)
        steps <- steps + 1
      },
      interrupt = function(cnd) {
        caught <<- caught + 1
        interrupted[[length(interrupted) + 1]] <<- made
      },
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

# exp() as an R host op that takes 20 ms a call: R runs at every step of
# a compiled computation, long enough for interrupts to land in it.
slow_exp_host_op <- function() {
  op_custom_gradient(trace = FALSE, value_like = "x", \(x) {
    Sys.sleep(0.02)
    xv <- as.array(x)
    tuple(op_convert_to_tensor(exp(xv), op_dtype(x)), \(upstream) {
      upstream * op_convert_to_tensor(exp(xv), op_dtype(x))
    })
  })
}
