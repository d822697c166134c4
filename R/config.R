#' Report customgrad's Python set-up
#'
#' `customgrad_config()` reports what customgrad and keras3 run on: the
#' Python in use and why it was chosen, the versions of Keras and of each
#' backend's package, whether each backend imports and the devices it sees
#' (a GPU shows up here, or does not), and the active backend. Like
#' [reticulate::py_config()] for reticulate.
#'
#' customgrad has no Python environment of its own: it uses the Python
#' keras3 uses, chosen the way reticulate chooses (`RETICULATE_PYTHON`,
#' [reticulate::use_virtualenv()], keras3's `r-keras` environment from
#' [keras3::install_keras()], or one reticulate provisions for what keras3
#' and customgrad declare with [reticulate::py_require()]).
#'
#' The backends are imported in a separate Python process each (the same
#' Python), never in the R session's: the report can be made before
#' [keras3::use_backend()], which still works afterwards. That takes a few
#' seconds per backend; a progress line shows which one is being checked.
#'
#' On Linux (x86-64), PyTorch's matrix products on the CPU run on the BLAS
#' R has loaded, and the report says so when that is the slow reference
#' BLAS Debian and Ubuntu install with R (`vignette("troubleshooting")`,
#' "PyTorch slower from R than from Python, on Linux").
#'
#' @returns A list of class `customgrad_config`, printed as a report:
#'   `python` (path), `chosen_by` (why reticulate chose it), `versions` (a
#'   named character vector, `NA` where a package is missing), `backends` (a
#'   data frame: `backend`, `imports`, `devices`), `active_backend`,
#'   `keras_started`, `blas` (R's BLAS, as [extSoftVersion()] gives it) and
#'   `blas_note` (the advice about it, or `character()`).
#' @seealso [keras3::install_keras()], [keras3::use_backend()] (with
#'   `gpu = TRUE` for a GPU); `vignette("troubleshooting")`, "Which Python,
#'   which devices".
#' @export
#' @examplesIf customgrad::backend_available()
#' customgrad_config()
customgrad_config <- function() {
  config <- python_config_or_null()
  python <- config$python %||% NA_character_
  packages <- c("keras", backend_names, "numpy")
  versions <- if (is.na(python)) {
    rlang::set_names(rep(NA_character_, length(packages)), packages)
  } else {
    python_package_versions(python, packages)
  }
  backends <- lapply(backend_names, function(backend) {
    cli::cli_progress_step("Checking the {.val {backend}} backend")
    probe_backend(python, backend)
  })
  backends <- do.call(rbind, backends)
  blas <- extSoftVersion()[["BLAS"]]
  torch <- isTRUE(backends$imports[backends$backend == "torch"])
  structure(
    list(
      python = python,
      chosen_by = if (is.null(config)) NA_character_ else python_reason(config),
      versions = versions,
      backends = backends,
      active_backend = backend_name(),
      keras_started = !is.null(keras_backend_in_python()),
      blas = blas,
      blas_note = if (torch) blas_note(blas) else character()
    ),
    class = "customgrad_config"
  )
}

# Advice for PyTorch users whose R has the reference BLAS, or character().
# On Linux the BLAS R loads first provides `sgemm_` to the whole process,
# and PyTorch's x86-64 wheels call their own (MKL's) by that name, so
# PyTorch's CPU matrix products run on R's BLAS (ELF symbol interposition,
# measured in bench/results/2026-11-28-to-12-01-history.md); macOS and
# Windows bind each library to its own. The reference BLAS is told by its
# file, as Debian and Ubuntu install it (`.../blas/libblas.so.3`); the
# optimised ones (OpenBLAS, MKL, BLIS, FlexiBLAS) and other layouts are
# not flagged.
blas_note <- function(
  blas,
  sysname = Sys.info()[["sysname"]],
  machine = Sys.info()[["machine"]]
) {
  linux_x86 <- identical(sysname, "Linux") &&
    machine %in% c("x86_64", "amd64")
  reference <- grepl("^libblas[.]so", basename(blas)) &&
    identical(basename(dirname(blas)), "blas")
  if (!linux_x86 || !reference) {
    return(character())
  }
  paste0(
    "R's BLAS is the reference BLAS (",
    blas,
    "). On Linux, PyTorch's ",
    "CPU matrix products in an R session run on it, more slowly than in ",
    "Python: install an optimised BLAS (on Debian and Ubuntu, ",
    "libopenblas0-pthread)."
  )
}

#' @export
print.customgrad_config <- function(x, ...) {
  cli::cli_h2("customgrad's Python set-up")
  if (is.na(x$python)) {
    cli::cli_alert_danger(
      "No Python found: reticulate will provision one when Keras starts, or run {.code keras3::install_keras()}."
    )
  } else {
    cli::cli_text("Python: {.file {x$python}} (chosen by {x$chosen_by})")
  }
  shown <- ifelse(is.na(x$versions), "missing", x$versions)
  cli::cli_text(
    "Versions: {paste(names(shown), shown, sep = ' ', collapse = ', ')}"
  )
  for (i in seq_len(nrow(x$backends))) {
    b <- x$backends[i, ]
    if (isTRUE(b$imports)) {
      cli::cli_alert_success("{b$backend}: imports; devices: {b$devices}")
    } else {
      cli::cli_alert_danger("{b$backend}: does not import")
    }
  }
  started <- if (x$keras_started) {
    "Keras is running with it"
  } else {
    "Keras has not started"
  }
  cli::cli_text("Active backend: {.val {x$active_backend}} ({started})")
  if (length(x$blas_note)) {
    cli::cli_alert_info("{x$blas_note}") # as text: a path may hold braces
    cli::cli_text(docs_hint(
      "troubleshooting",
      "PyTorch slower from R than from Python, on Linux",
      "customgrad_config"
    ))
  }
  invisible(x)
}

# reticulate's configuration of the Python in use (or that would be used),
# NULL when none would be found; starts no Python.
python_config_or_null <- function() {
  if (reticulate::py_available(initialize = FALSE)) {
    return(reticulate::py_config())
  }
  python_choice()
}

# Versions of Python packages, read from their metadata by `python` in a
# subprocess (nothing is imported); NA for a missing one.
python_package_versions <- function(python, packages) {
  code <- paste0(
    "import importlib.metadata as m\n",
    "for p in ",
    python_list(packages),
    ":\n",
    "    try:\n",
    "        print(p, m.version(p))\n",
    "    except m.PackageNotFoundError:\n",
    "        print(p, 'NA')\n"
  )
  out <- run_python(python, code)
  versions <- rlang::set_names(rep(NA_character_, length(packages)), packages)
  for (line in strsplit(out, " ", fixed = TRUE)) {
    if (length(line) == 2L && line[[1]] %in% packages && line[[2]] != "NA") {
      versions[[line[[1]]]] <- line[[2]]
    }
  }
  # tensorflow-cpu is the distribution of the tensorflow module here.
  if (is.na(versions[["tensorflow"]])) {
    cpu <- run_python(
      python,
      paste0(
        "import importlib.metadata as m\n",
        "try:\n    print(m.version('tensorflow-cpu'))\n",
        "except m.PackageNotFoundError:\n    print('NA')\n"
      )
    )
    if (length(cpu) == 1L && cpu != "NA") versions[["tensorflow"]] <- cpu
  }
  versions
}

# Whether `backend`'s module imports in a fresh `python`, and the devices it
# sees, as a one-row data frame.
probe_backend <- function(python, backend) {
  code <- switch(
    backend,
    tensorflow = "import tensorflow as tf\nprint(', '.join(d.name for d in tf.config.list_physical_devices()))",
    jax = "import jax\nprint(', '.join(str(d) for d in jax.devices()))",
    # CUDA (and ROCm, which torch also calls cuda) and Apple's MPS.
    torch = paste0(
      "import torch\n",
      "mps = getattr(torch.backends, 'mps', None)\n",
      "print(', '.join(['cpu'] + [f'cuda:{i}' for i in range(torch.cuda.device_count())]",
      " + (['mps'] if mps is not None and mps.is_available() else [])))"
    )
  )
  out <- if (is.na(python)) character() else run_python(python, code)
  imports <- length(out) > 0L && !is.na(out[[length(out)]])
  data.frame(
    backend = backend,
    imports = imports,
    devices = if (imports) out[[length(out)]] else NA_character_
  )
}

# The standard output lines of `python -c code`, or character() if it
# failed or took longer than a minute. TensorFlow's start-up log goes to
# standard error, which is dropped. The process gets a temporary directory
# of its own, removed afterwards: importing torch leaves files in it.
run_python <- function(python, code) {
  tmp <- tempfile("customgrad-python-")
  dir.create(tmp)
  on.exit(unlink(tmp, recursive = TRUE), add = TRUE)
  out <- suppressWarnings(tryCatch(
    system2(
      python,
      c("-c", shQuote(code)),
      stdout = TRUE,
      stderr = FALSE,
      timeout = 60,
      env = paste0("TMPDIR=", shQuote(tmp))
    ),
    error = function(cnd) character()
  ))
  if (!is.null(attr(out, "status")) && attr(out, "status") != 0) {
    return(character())
  }
  out
}

python_list <- function(x) {
  paste0("[", paste0("'", x, "'", collapse = ", "), "]")
}
