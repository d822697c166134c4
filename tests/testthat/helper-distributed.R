# Runs of the example script inst/examples/distributed-train.R (JAX): as
# `processes` R processes of one data-parallel run on this host, and alone
# on the combined batches. Also used by `make distributed-demo`
# (tools/distributed-demo.R sources this file).

# A port on this host that nothing listens on now.
free_port <- function() {
  for (port in sample(20000:40000, 50)) {
    socket <- tryCatch(serverSocket(port), error = function(cnd) NULL)
    if (!is.null(socket)) {
      close(socket)
      return(port)
    }
  }
  stop("No free port found.")
}

# Start `script` with `args` as process `id` of a JAX run of `processes`
# coordinated on `port` of this host; `id` NULL: alone.
start_jax_process <- function(
  script,
  args,
  processes,
  id,
  port,
  libpath = .libPaths()
) {
  run_env <- if (is.null(id)) {
    character()
  } else {
    c(
      KERAS_DISTRIBUTION_NUM_PROCESSES = processes,
      KERAS_DISTRIBUTION_PROCESS_ID = id,
      KERAS_DISTRIBUTION_JOB_ADDRESSES = paste0("127.0.0.1:", port)
    )
  }
  processx::process$new(
    file.path(R.home("bin"), "Rscript"),
    c(script, args),
    env = c(
      "current",
      KERAS_BACKEND = "jax",
      R_LIBS = paste(libpath, collapse = .Platform$path.sep),
      TF_CPP_MIN_LOG_LEVEL = "3",
      run_env
    ),
    stdout = "|",
    stderr = "2>&1",
    cleanup_tree = TRUE
  )
}

# What each of `runs` (processx processes) printed, once all have ended or
# `timeout` seconds have passed (those still running are killed).
wait_for_processes <- function(runs, timeout = 600) {
  deadline <- Sys.time() + timeout
  vapply(
    runs,
    function(run) {
      run$wait(max(0, as.numeric(deadline - Sys.time(), units = "secs")) * 1000)
      if (run$is_alive()) {
        run$kill_tree()
      }
      paste(run$read_all_output_lines(), collapse = "\n")
    },
    character(1)
  )
}

# The final weights of each process of a run and of the run alone (a list:
# `processes`, one numeric vector per process, and `alone`), and what each
# printed. Fails with a process's output when one fails.
run_distributed_example <- function(
  steps,
  processes = 2L,
  timeout = 600,
  libpath = .libPaths()
) {
  dir <- tempfile("distributed-")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  port <- free_port()
  files <- file.path(
    dir,
    c(sprintf("process-%d.rds", seq_len(processes) - 1L), "alone.rds")
  )
  script <- system.file(
    "examples",
    "distributed-train.R",
    package = "customgrad",
    mustWork = TRUE
  )
  ids <- c(as.list(seq_len(processes) - 1L), list(NULL)) # NULL: alone
  runs <- lapply(seq_along(ids), function(i) {
    start_jax_process(
      script,
      c(steps, files[[i]]),
      if (is.null(ids[[i]])) 1L else processes,
      ids[[i]],
      port,
      libpath
    )
  })
  output <- wait_for_processes(runs, timeout)
  failed <- !file.exists(files)
  if (any(failed)) {
    stop(
      "A process of the distributed example failed:\n",
      output[which(failed)[[1]]]
    )
  }
  weights <- lapply(files, readRDS)
  list(
    processes = weights[seq_len(processes)],
    alone = weights[[processes + 1L]],
    output = output
  )
}
