# Python: which one customgrad and keras3 share, and handles to customgrad's
# Python module. Handles are made on first use, never at load time, so that
# library(customgrad) does not start Python and the backend can still be
# chosen with keras3's use_backend().

# customgrad's Python module (inst/python/customgrad), registered in
# .onLoad as a delayed import. It names no environment and no priority:
# customgrad uses whatever Python keras3 would use (an explicit choice,
# keras3's r-keras, a Python provisioned from py_require()) and never
# outranks it. customgrad_py() puts the module's directory on sys.path.
register_python_module <- function() {
  the$py_module <- reticulate::import(
    "customgrad",
    convert = TRUE,
    delay_load = TRUE
  )
}

# The one accessor for customgrad's Python handles: the package, or one of
# its public modules (`customgrad_py("layers")`), ready to use. The first
# call checks Python (and starts it), registers R's callbacks and notes
# Keras' backend; every call checks that a backend chosen since (with
# KERAS_BACKEND) is the same. Made functions keep their handles and skip
# both.
customgrad_py <- function(submodule = NULL, call = rlang::caller_env()) {
  if (!isTRUE(the$py_ready)) {
    start_python(call)
    add_python_path()
    the$backend <- keras_backend_in_python()
    set_collector()
    the$py_module$set_r_library(r_library_paths())
    the$py_module$set_grad_runner(
      r_callback(run_grad),
      r_callback(release_grads)
    )
    the$py_ready <- TRUE
  }
  ensure_backend_unchanged(call)
  if (is.null(submodule)) the$py_module else import_submodule(submodule)
}

# customgrad's Python package (inst/python) on Python's module path.
add_python_path <- function() {
  path <- system.file("python", package = "customgrad", mustWork = TRUE)
  sys <- reticulate::import("sys", convert = FALSE)
  if (!reticulate::py_to_r(sys$path$`__contains__`(path))) {
    sys$path$insert(0L, path)
  }
}

# customgrad's Python package, or one of its public modules ("errors",
# "layers"), imported once per conversion. R calls the package's names
# listed in its R_INTERFACE (inst/python/customgrad/__init__.py), never a
# private module's.
import_submodule <- function(name = NULL, convert = TRUE) {
  module <- paste(c("customgrad", name), collapse = ".")
  key <- paste0(module, if (!convert) ":noconvert")
  py <- the$submodules[[key]]
  if (is.null(py)) {
    py <- reticulate::import(module, convert = convert)
    assign(key, py, envir = the$submodules)
  }
  py
}

# Keras fixes its backend when it starts; a backend chosen after that (with
# KERAS_BACKEND) would silently not apply.
ensure_backend_unchanged <- function(call = rlang::caller_env()) {
  chosen <- Sys.getenv("KERAS_BACKEND")
  if (nzchar(chosen) && !identical(chosen, the$backend)) {
    abort_backend_started(chosen, the$backend, call)
  }
}

abort_backend_started <- function(chosen, running, call) {
  abort_customgrad(
    c(
      "Can't use the {.val {chosen}} backend: Keras already runs with {.val {running}}.",
      "x" = "Keras fixes its backend when it starts, once per R session.",
      "i" = "Restart R, then call {.code keras3::use_backend({.val {chosen}})} before anything else starts Keras."
    ),
    class = "backend_started",
    call = call
  )
}

# Start Python with Keras the way keras3 does, after checking that the
# Python has Keras and the backend's module. With no Python chosen or found,
# reticulate provisions one for the requirements keras3 and customgrad
# declared with py_require() (declare_python_requirements()), the same
# whichever package starts Python first; when that fails (offline without
# `uv`), the error says how else to get a Python.
start_python <- function(call = rlang::caller_env()) {
  if (!reticulate::py_available(initialize = FALSE)) {
    if (is.null(python_choice())) {
      start_provisioned_python(call)
    }
  }
  ensure_python_modules(call)
  # keras3's module handle imports keras (with KERAS_BACKEND as chosen with
  # use_backend()) and runs keras3's hooks.
  keras3::keras$ops
  invisible(TRUE)
}

# Provisioning starts through keras3's module handle, as `library(keras3)`
# users start it: the same provisioned Python, and keras3's hooks run.
# `start`: how Python starts (use_distributed() starts it without Keras).
start_provisioned_python <- function(
  call,
  start = function() keras3::keras$ops
) {
  tryCatch(
    start(),
    error = function(cnd) {
      abort_customgrad(
        c(
          "customgrad needs Python with Keras 3, and reticulate couldn't provision one.",
          "i" = "No Python was chosen or found, so reticulate tried to create one with {.code uv} for what keras3 and customgrad declare with {.fn reticulate::py_require}.",
          "i" = "Connect to the internet and try again in a new R session, or run {.code keras3::install_keras()}, or set {.envvar RETICULATE_PYTHON} to a Python with Keras, then restart R."
        ),
        class = "python_missing",
        parent = cnd,
        call = call
      )
    }
  )
}

# What customgrad needs from Python, declared once, in DESCRIPTION's
# SystemRequirements ("Python (>= 3.11) with keras (>= 3.14)"), and read
# from there: py_require() declares it, ensure_python_versions() checks it,
# the docs and tools/check-platforms.R say it. Keras only, with the
# Pythons Keras supports: the backends' packages are keras3's to choose
# (use_backend(gpu = ), the platform), so customgrad never adds a CPU-only
# or CUDA build to them. The Keras minimum is the oldest release tested
# (make test-keras-previous).
python_requirements <- function() {
  declared <- utils::packageDescription(
    "customgrad",
    fields = "SystemRequirements"
  )
  minimum <- function(name) {
    found <- regmatches(
      declared,
      regexec(paste0(name, " \\(>= ([0-9.]+)\\)"), declared)
    )[[1]]
    if (length(found) != 2L) {
      rlang::abort(
        paste0("DESCRIPTION's SystemRequirements names no ", name, " version."),
        .internal = TRUE
      )
    }
    found[[2]]
  }
  list(python = minimum("Python"), keras = minimum("keras"))
}

# Declared the way keras3 declares its own, so that a Python reticulate
# provisions (when none is chosen) has it: "keras", which keras3 declares
# too (py_require() lists it once), and the Python range.
declare_python_requirements <- function() {
  tryCatch(
    reticulate::py_require(
      "keras",
      python_version = paste0(">=", python_requirements()$python)
    ),
    error = function(cnd) invisible(NULL)
  )
}

# The Python reticulate would start, or NULL when it would provision one
# (see start_python()). reticulate's discovery gives no configuration for
# the Python it provisions from py_require(): it makes that one only while
# it starts Python, so asking downloads nothing.
python_choice <- function() {
  if (identical(Sys.getenv("RETICULATE_PYTHON"), "managed")) {
    return(list(python = "managed", forced = "RETICULATE_PYTHON"))
  }
  tryCatch(reticulate::py_discover_config(), error = function(cnd) NULL)
}

ensure_python_modules <- function(
  call,
  backend = backend_name(),
  missing = missing_python_modules(backend)
) {
  # KERAS_BACKEND (or keras3's use_backend()) may name any backend.
  check_backend(backend, arg = "KERAS_BACKEND", call = call)
  config <- reticulate::py_config()
  if (length(missing) == 0) {
    return(ensure_python_versions(config, call))
  }
  abort_customgrad(
    c(
      "The Python in use lacks {.pkg {missing}}, which the {.val {backend}} backend needs.",
      "i" = "Python: {.file {config$python}}, chosen by {python_reason(config)}.",
      "i" = "Run {.code keras3::install_keras(backend = \"{backend}\")} and restart R, or choose a Python that has them with {.envvar RETICULATE_PYTHON}."
    ),
    class = if ("keras" %in% missing) "python_missing" else "backend_missing",
    call = call
  )
}

# The Python and Keras in use against python_requirements; run once, when
# customgrad first starts Python.
ensure_python_versions <- function(
  config,
  call,
  keras = python_package_version("keras")
) {
  python <- numeric_version(config$version, strict = FALSE)
  keras <- numeric_version(keras, strict = FALSE)
  needs <- python_requirements()
  old <- c(
    python = isTRUE(python < needs$python),
    keras = isTRUE(keras < needs$keras)
  )
  if (!any(old)) {
    return(invisible())
  }
  abort_customgrad(
    c(
      "customgrad needs Python {needs$python} or newer with Keras {needs$keras} or newer.",
      "x" = "The Python in use is {.file {config$python}}: Python {python}, Keras {keras}.",
      "i" = if (old[["keras"]] && !old[["python"]]) {
        "Upgrade Keras with {.code reticulate::py_install(\"keras\")}, or run {.code keras3::install_keras()} and restart R."
      } else {
        "Run {.code keras3::install_keras()} and restart R, or choose a newer Python with {.envvar RETICULATE_PYTHON}."
      }
    ),
    class = "python_version",
    call = call
  )
}

# A Python package's installed version, from its metadata (not imported).
python_package_version <- function(name) {
  metadata <- reticulate::import("importlib.metadata", convert = TRUE)
  tryCatch(metadata$version(name), error = function(cnd) NA_character_)
}

missing_python_modules <- function(backend) {
  c(
    if (!py_module_installed("keras")) "keras",
    if (!py_module_installed(backend)) backend
  )
}

# Why reticulate chose this Python, in the words keras3 users know.
python_reason <- function(config) {
  forced <- config$forced %||% ""
  python <- config$python %||% ""
  if (isTRUE(config$ephemeral) || identical(forced, "py_require()")) {
    return(
      "reticulate, which provisioned it for what keras3 and customgrad declare with py_require()"
    )
  }
  if (grepl("[/\\\\]r-keras[/\\\\]", python)) {
    return("keras3 (its r-keras environment, from install_keras())")
  }
  if (!nzchar(forced)) {
    return("reticulate's default search")
  }
  switch(
    forced,
    RETICULATE_PYTHON = "the RETICULATE_PYTHON environment variable",
    VIRTUAL_ENV = "the activated virtual environment (VIRTUAL_ENV)",
    "use_python() function" = "a reticulate::use_python() or use_virtualenv() call",
    forced
  )
}

# An R callback for a Python callable kept in `state$py`, calling
# `fn(state, ...)`; `fn` is a namespace function, so its environment holds
# no state. The callback holds `state` by a weak reference: a strong one
# would make an R -> Python -> R cycle that neither collector can see, and
# nothing the function captured would be released when it is dropped (f's
# environment often holds the function itself). Python code that keeps the
# callable keeps `state` alive itself (r_to_py.customgrad_function()).
state_callback <- function(state, fn) {
  force(fn) # a promise would hold the caller's frame, `state` with it
  ref <- rlang::new_weakref(state)
  rm(state)
  r_callback(function(...) fn(rlang::wref_key(ref), ...))
}

# Called from Python when tensors handed to R (or the process's memory)
# grew past the threshold (customgrad.gc_threshold_mb, see _memory.py)
# since the last collection: R's
# references are what keeps them alive. The grad callbacks Python has
# dropped go first, so that the values of f they hold are garbage now
# rather than promoted to an older generation by this minor collection
# (_memory.py says why minor).
collect_garbage <- function() {
  if (isTRUE(the$py_ready)) {
    release_grads(the$py_module$take_released())
  }
  gc(full = FALSE, verbose = gcinfo(NA)) # reported when gcinfo(TRUE) is on
  invisible(NULL)
}

# Register R's collector with _memory.py, with a threshold in MB (the
# option's unless given).
set_collector <- function(
  threshold_mb = getOption("customgrad.gc_threshold_mb", 64)
) {
  import_submodule(convert = FALSE)$set_collector(
    r_callback(collect_garbage),
    threshold_mb * 2^20,
    r_callback(defer_collection)
  )
}

# Called from Python when a collection fell due during a call of an
# op_grad() or op_compile() function: R runs it at the start of the next
# such call (collect_if_deferred()). Run inside the call, it would keep
# the call's result past the minor collections after it (_memory.py).
defer_collection <- function() {
  the$collection_deferred <- TRUE
  invisible(NULL)
}

# The first thing a transform's function does (new_transform()): the
# collection deferred, if any, while nothing of this call is bound yet.
collect_if_deferred <- function() {
  if (isTRUE(the$collection_deferred)) {
    the$collection_deferred <- FALSE
    import_submodule(convert = FALSE)$collect_deferred()
  }
  invisible(NULL)
}

# Call keras.ops.<name>(...), with results as keras3 gives them.
call_op <- function(name, ...) {
  fn <- the$ops[[name]]
  if (is.null(fn)) {
    fn <- reticulate::py_get_attr(keras3::keras$ops, name)
    assign(name, fn, envir = the$ops)
  }
  fn(...)
}
