# Helpers for the SIGINT tests in test-interrupts.R: a child R session (a
# SIGINT to this process would stop testthat itself) and a run of a
# function there that receives interrupts.

# A child session for a SIGINT test, on the backend of this process
# (KERAS_BACKEND), killed when the test ends.
local_child_session <- function(frame = parent.frame()) {
  session <- callr::r_session$new(
    callr::r_session_options(
      libpath = .libPaths(),
      env = c(
        callr::rcmd_safe_env(),
        KERAS_BACKEND = Sys.getenv("KERAS_BACKEND")
      )
    ),
    wait_timeout = 120000
  )
  withr::defer(session$kill(), envir = frame)
  session$run(
    function(interrupt_loop) {
      suppressPackageStartupMessages({
        library(keras3)
        library(customgrad)
      })
      source(interrupt_loop)
      # Python, Keras and the backend loaded before any interrupt: one
      # that lands in Python's imports leaves them half-imported.
      h <- op_custom_gradient(\(x) tuple(x * 2, \(upstream) upstream * 2))
      invisible(op_grad(h)(1))
    },
    list(interrupt_loop = normalizePath(test_path("interrupt-loop.R")))
  )
  session
}

# Starts `fn(...)` in `session`, sends it `n` SIGINTs `every` seconds apart
# from one second on, and returns its result. `fn` must catch them and go on
# for longer than that (see interrupt-loop.R): set-up belongs in an earlier
# `session$run()`.
run_interrupted <- function(session, fn, args = list(), n = 8, every = 0.5) {
  session$call(fn, args)
  Sys.sleep(1)
  for (i in seq_len(n)) {
    session$interrupt()
    Sys.sleep(every)
  }
  repeat {
    if (session$poll_process(120000) != "ready") {
      session$kill()
      stop("The child session did not answer within 120 s of the interrupts.")
    }
    out <- session$read()
    # Until the call's end: read() gives NULL while the reply is not yet
    # whole, and passes on progress events (code 301) of its own.
    if (!is.null(out) && !out$code %in% c(201, 202, 301)) break
  }
  if (out$code != 200 && is.null(out$error)) {
    stop(sprintf("The child session replied %d: %s", out$code, out$message))
  }
  if (!is.null(out$error)) {
    stop(out$error)
  }
  if (is.null(out$result)) {
    # callr gives NULL when the child wrote neither a result nor an error
    # (seen 1 in about 6 runs of the 30 s grad loop's test on JAX).
    stop("The child session's call ended without a result or an error.")
  }
  out$result
}

# The interrupts stopped calls: caught as interrupts, or as reticulate's
# error for one that landed in its class lookup, or taken by R in the
# loop's own code between steps (kept with where, and said on failure).
# Fewer than the `n` sent when two came while R was still handling one (R
# keeps one pending).
expect_stopped_by_interrupts <- function(run, n) {
  stopped <- run$caught + run$errors + length(run$escaped)
  expect(
    stopped <= n &&
      stopped >= n / 2 &&
      all(grepl("inspect.getmro", run$messages, fixed = TRUE)),
    paste(
      c(
        sprintf(
          "%d interrupts sent; %d caught (at %s s), %d errors: %s; %d outside the step:",
          n,
          run$caught,
          paste(sprintf("%.2f", run$caught_at), collapse = ", "),
          run$errors,
          paste(run$messages, collapse = "; "),
          length(run$escaped)
        ),
        run$escaped
      ),
      collapse = "\n"
    )
  )
  expect_gt(run$caught, 0)
}
