# Sourced in the child R sessions of the SIGINT tests (helper-interrupts.R).

# `step(made)` again and again for `seconds`, catching interrupts. Returns
# how many steps finished, how many interrupts were caught (and when), those
# R took outside the step (`escaped`: when and where), and how many errors
# with which messages (reticulate reports an interrupt that lands
# in its own lookup of a Python class as an error); what an interrupted
# step passed to `made()` is kept in `interrupted`, for checks afterwards.
caught_interrupts <- function(step, seconds) {
  interrupted <<- list()
  caught <- 0
  errors <- character()
  escaped <- character()
  caught_at <- numeric()
  steps <- 0
  started <- Sys.time()
  elapsed <- function() as.numeric(Sys.time() - started, units = "secs")
  # An interrupt that R takes outside the step (in this loop's own code, or
  # later than the step that held it) is kept with where and when R took
  # it, rather than stopping the loop.
  outside <- function(expr, otherwise) {
    tryCatch(
      withCallingHandlers(expr, interrupt = function(cnd) {
        calls <- vapply(sys.calls(), \(x) deparse(x)[[1]], "")
        escaped <<- c(
          escaped,
          sprintf("%.2f s in: %s", elapsed(), paste(calls, collapse = " > "))
        )
      }),
      interrupt = function(cnd) otherwise
    )
  }
  repeat {
    made <- NULL
    finished <- outside(
      elapsed() >= seconds ||
        tryCatch(
          {
            step(function(x) made <<- x)
            steps <- steps + 1
            FALSE
          },
          interrupt = function(cnd) {
            caught <<- caught + 1
            caught_at <<- c(caught_at, elapsed())
            interrupted[[length(interrupted) + 1]] <<- made
            FALSE
          },
          error = function(cnd) {
            errors <<- c(errors, conditionMessage(cnd))
            FALSE
          }
        ),
      FALSE
    )
    if (finished) break
  }
  # One that R still holds is taken here, not in callr's reply.
  outside(Sys.sleep(0.2), NULL)
  list(
    steps = steps,
    caught = caught,
    errors = length(errors),
    messages = unique(errors),
    escaped = escaped,
    caught_at = caught_at
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
