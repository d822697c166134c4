# Arranging a run over several processes or devices before the backend
# starts; Python does it inside the backend's import (_distributed.py).

#' Train across processes and devices
#'
#' Arranges, before the backend starts, what a run over several processes
#' or devices needs: the JAX backend joins a run of `num_processes`
#' processes, one per host (or several on one host), coordinated by process
#' 0 at `coordinator`; TensorFlow or JAX split this process's CPU into
#' `local_devices` devices. Keras' distribution API
#' (`keras$distribution$DataParallel()`, JAX) and TensorFlow's strategies
#' (`tf$distribute$MirroredStrategy()`) then train over them, custom
#' gradients included.
#'
#' Both settings must be made before the backend starts, and in R it starts
#' early: keras3 converts a tensor as soon as Keras is imported, so calling
#' `jax$distributed$initialize()` or
#' `tf$config$set_logical_device_configuration()` yourself fails with any
#' Keras code before it. `use_distributed()` has customgrad apply them
#' inside the backend module's own import, whoever imports it, so it works
#' with keras3 attached before or after customgrad. Call it at the top of
#' the script, after [keras3::use_backend()] and before any other Keras
#' code. It starts Python (without importing Keras); with the JAX backend
#' and several processes it also imports JAX, which waits until every
#' process has joined. At R's exit each process leaves the run and waits
#' for the others to leave, so process 0, which hosts the coordinator,
#' ends last.
#'
#' The defaults come from the environment variables Keras' own
#' `keras.distribution.initialize()` reads, so a launcher can set them and
#' every process run the same script: `KERAS_DISTRIBUTION_NUM_PROCESSES`,
#' `KERAS_DISTRIBUTION_PROCESS_ID` and `KERAS_DISTRIBUTION_JOB_ADDRESSES`
#' (the first address is the coordinator).
#'
#' Custom gradients need nothing more: R traces `f` and `grad` once per
#' input signature, on the main thread, and every replica replays the
#' trace in Python. TensorFlow's `MirroredStrategy` runs its replicas on
#' threads of their own, where R can't run; a trace they need is made on
#' the main thread, between their steps (`merge_call()`), so R never runs
#' on a replica's thread. A function that can't be traced (one that falls
#' back to R at every call) can't run in a replica: it fails with
#' `customgrad_error_thread`.
#'
#' See `vignette("training")`, "When one machine is not enough", for the
#' launch recipe, GPUs and TPUs, and what to check when processes disagree.
#'
#' @param num_processes How many processes take part (JAX only, beyond 1).
#' @param process_id This process's number, from 0 (the coordinator) to
#'   `num_processes - 1`.
#' @param coordinator `"host:port"` where process 0 listens and the others
#'   connect (JAX); the port must be free on that host.
#' @param local_devices How many CPU devices this process splits its CPU
#'   into, or `NULL` for the backend's default (one CPU device; on GPUs
#'   and TPUs, leave it `NULL`: each accelerator is a device).
#' @returns Invisibly, the settings as a list: `num_processes` and
#'   `process_id` (integers), `coordinator` (the `"host:port"` string,
#'   `"127.0.0.1:12355"` unless given or set in
#'   `KERAS_DISTRIBUTION_JOB_ADDRESSES`) and `local_devices` (an integer, or
#'   `NULL` for the backend's default).
#' @seealso [keras3::use_backend()], to call first;
#'   [customgrad_config()] for the devices each backend sees;
#'   `vignette("training")`, "When one machine is not enough", and the
#'   script `system.file("examples", "distributed-train.R", package =
#'   "customgrad")` for a run over several processes.
#' @export
#' @examples
#' # Launched alone: one process on its default devices, nothing to arrange.
#' settings <- use_distributed()
#' settings$num_processes
#'
#' # Two CPU devices for TensorFlow's MirroredStrategy, in a fresh R session
#' # before any other Keras code (see inst/examples/distributed-train.R for
#' # several JAX processes):
#' if (FALSE) {
#'   library(keras3)
#'   library(customgrad)
#'   use_distributed(local_devices = 2)
#'   strategy <- tensorflow::tf$distribute$MirroredStrategy()
#'   strategy$num_replicas_in_sync # 2
#' }
use_distributed <- function(
  num_processes = env_integer("KERAS_DISTRIBUTION_NUM_PROCESSES", 1L),
  process_id = env_integer("KERAS_DISTRIBUTION_PROCESS_ID", 0L),
  coordinator = first_job_address(),
  local_devices = NULL
) {
  check_count(num_processes)
  check_count(process_id, from = 0L)
  if (process_id >= num_processes) {
    abort_customgrad(
      c(
        "{.arg process_id} must be below {.arg num_processes}.",
        "x" = "It is {process_id}, and {.arg num_processes} is {num_processes}.",
        "i" = "Number the processes from 0 (the coordinator) to {num_processes - 1}."
      ),
      class = "bad_argument"
    )
  }
  if (!is.null(local_devices)) {
    check_count(local_devices)
  }
  backend <- backend_name()
  if (num_processes > 1) {
    check_coordinator(coordinator)
  }
  ensure_distributed_backend(backend, num_processes, local_devices)
  settings <- list(
    num_processes = as.integer(num_processes),
    process_id = as.integer(process_id),
    coordinator = coordinator,
    local_devices = if (!is.null(local_devices)) as.integer(local_devices)
  )
  # One process on the default devices (a launcher's script run alone)
  # needs nothing arranged.
  if (num_processes > 1 || !is.null(local_devices)) {
    arrange_distributed(backend, settings)
  }
  invisible(settings)
}

arrange_distributed <- function(backend, settings, call = rlang::caller_env()) {
  if (
    !reticulate::py_available(initialize = FALSE) && is.null(python_choice())
  ) {
    start_provisioned_python(call, start = reticulate::py_config)
  }
  ensure_python_modules(call, backend)
  add_python_path()
  customgrad <- import_submodule()
  joins <- settings$num_processes > 1
  if (joins) {
    cli::cli_inform(c(
      "i" = "Joining a run of {settings$num_processes} processes as process {settings$process_id}, coordinated at {.val {settings$coordinator}}; waiting for the others."
    ))
  }
  tryCatch(
    {
      rlang::exec(customgrad$arrange, backend, !!!settings)
      if (joins && identical(backend, "jax")) {
        # The import runs the join (see _distributed.py), and keras3's
        # import hooks start Keras after it.
        reticulate::import("jax")
        leave_run_at_exit()
      }
    },
    customgrad_error_distributed_started = function(cnd) {
      abort_distributed_started(backend, call)
    }
  )
}

# JAX leaves a run of several processes from Python's atexit hooks
# (jax._src.api.clean_up), waiting there for every process to leave; R ends
# without running them (reticulate does not finalize Python), so process 0,
# which hosts the coordinator, ended first and the others were killed
# mid-run. R's own exit finalizer leaves instead.
leave_run_at_exit <- function() {
  if (is.null(the$leaves_run)) {
    the$leaves_run <- new.env(parent = emptyenv())
    reg.finalizer(
      the$leaves_run,
      function(e) {
        try(reticulate::import("jax")$distributed$shutdown(), silent = TRUE)
      },
      onexit = TRUE
    )
  }
  invisible()
}

# What each backend can arrange: several processes only JAX, devices not
# PyTorch.
ensure_distributed_backend <- function(
  backend,
  num_processes,
  local_devices,
  call = rlang::caller_env()
) {
  if (num_processes > 1 && !identical(backend, "jax")) {
    abort_customgrad(
      c(
        "A run of several processes needs the JAX backend.",
        "x" = "Keras runs with {.val {backend}}.",
        "i" = "Call {.code keras3::use_backend(\"jax\")} first; with TensorFlow, use {.arg local_devices} and {.code tf$distribute$MirroredStrategy()} in one process."
      ),
      class = "distributed",
      call = call
    )
  }
  if (!is.null(local_devices) && identical(backend, "torch")) {
    abort_customgrad(
      c(
        "Keras' PyTorch backend has no devices to arrange.",
        "i" = "Use the JAX or TensorFlow backend for {.arg local_devices}."
      ),
      class = "distributed",
      call = call
    )
  }
}

abort_distributed_started <- function(backend, call) {
  abort_customgrad(
    c(
      "Processes and devices must be arranged before the backend starts.",
      "x" = "Keras has started with {.val {backend}} already.",
      "i" = "Restart R and call {.fn use_distributed} at the top of the script, after {.fn keras3::use_backend} and before any other Keras code."
    ),
    class = "distributed_started",
    call = call
  )
}

# The coordinator keras.distribution.initialize() would use: the first of
# KERAS_DISTRIBUTION_JOB_ADDRESSES, else a port on this host.
first_job_address <- function() {
  addresses <- Sys.getenv("KERAS_DISTRIBUTION_JOB_ADDRESSES")
  if (!nzchar(addresses)) {
    return("127.0.0.1:12355")
  }
  trimws(strsplit(addresses, ",", fixed = TRUE)[[1]][[1]])
}

env_integer <- function(name, default) {
  value <- Sys.getenv(name)
  if (nzchar(value)) suppressWarnings(as.integer(value)) else default
}

check_coordinator <- function(
  x,
  ...,
  arg = rlang::caller_arg(x),
  call = rlang::caller_env()
) {
  ok <- is.character(x) && length(x) == 1 && grepl("^[^:]+:[0-9]+$", x)
  if (!ok) {
    abort_argument(
      x,
      "{.val host:port}",
      "bad_argument",
      arg,
      call,
      hint = "Give the address of process 0 and a free port, such as {.val 10.0.0.1:12355}."
    )
  }
}
