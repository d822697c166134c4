# Part of `make test`: what customgrad declares for Python, and what keras3
# asks for with it on each platform, resolves from the package index for
# Linux (x86_64, aarch64), macOS (arm64) and Windows (x86_64), on every
# Python in customgrad's range, with wheels only. Nothing is installed:
# `uv pip compile --python-platform` resolves for another platform from the
# index's metadata. (pip download --platform evaluates dependencies'
# environment markers for this machine, so torch for macOS asks for
# Linux's CUDA libraries; uv evaluates them for the target.)
#
# Checked (`make test`): customgrad's declaration
# (customgrad:::python_requirements()) resolves on every platform and every
# Python in its range, not on the Python below it (Keras needs the floor),
# and pulls no CPU-only or CUDA build.
#
# With --keras3 (`make platforms`, ten minutes, not in CI), it also reports
# the backend sets keras3 asks for with customgrad attached: keras3's own
# platform test (its get_os()) is set to each platform in an R process,
# which calls keras3::use_backend(), CPU and GPU, as a user there would,
# and reads reticulate::py_require(). customgrad adds no package to them
# (test-python-once.R), so where one does not resolve, it is keras3's set that
# doesn't: reported, not counted.
# Usage: Rscript tools/check-platforms.R UV [COUNTS_FILE] [--keras3]
#   UV: the uv binary (installed from PyPI by the Makefile);
#   COUNTS_FILE: where to write "passed failed skipped" for tools/run-tests.R.
args <- commandArgs(trailingOnly = TRUE)
with_keras3 <- "--keras3" %in% args
args <- setdiff(args, "--keras3")
uv <- normalizePath(args[[1]])
counts_file <- if (length(args) > 1 && nzchar(args[[2]])) args[[2]] else NULL
needs <- customgrad:::python_requirements()

platforms <- utils::read.table(
  header = TRUE,
  text = "
  name             os      target
  'Linux x86_64'   Linux   x86_64-unknown-linux-gnu
  'Linux aarch64'  Linux   aarch64-unknown-linux-gnu
  'macOS arm64'    macOS   aarch64-apple-darwin
  'Windows x86_64' Windows x86_64-pc-windows-msvc"
)
floor <- unlist(numeric_version(needs$python)) # major, minor
below <- sprintf("%d.%d", floor[[1]], floor[[2]] - 1L)
# The floor of customgrad's range and the newer Pythons every backend
# publishes wheels for.
pythons <- sprintf("%d.%d", floor[[1]], floor[[2]] + 0:2)
backends <- c("tensorflow", "jax", "torch")

# What keras3 + customgrad ask py_require() for on `os`, per backend and
# gpu setting: one R process each, which takes itself for that platform and
# calls use_backend() once, as a user there would.
requirements_on <- function(os) {
  out <- list()
  for (backend in backends) {
    for (gpu in c(FALSE, TRUE)) {
      out[[sprintf("%s%s", backend, if (gpu) " (GPU)" else "")]] <- callr::r(
        function(os, backend, gpu) {
          library(keras3)
          ns <- asNamespace("keras3")
          for (name in c("get_os", "is_linux")) {
            unlockBinding(name, ns)
          }
          assign("get_os", function() os, envir = ns)
          assign("is_linux", function() os == "Linux", envir = ns)
          library(customgrad)
          # keras3 warns where a platform has no GPU build for a backend.
          suppressWarnings(use_backend(backend, gpu = gpu))
          reticulate::py_require()
        },
        args = list(os = os, backend = backend, gpu = gpu),
        libpath = .libPaths()
      )
    }
  }
  out
}

# uv's resolution of `packages` for `target` and `python`: the resolved
# lines, with attribute ok.
resolve <- function(packages, target, python) {
  input <- tempfile(fileext = ".in")
  on.exit(unlink(input))
  writeLines(packages, input)
  run <- processx::run(
    uv,
    c(
      "pip",
      "compile",
      # Else uv tries to download each target Python it doesn't have, and
      # waits seconds for every refusal offline; resolving needs none.
      "--no-python-downloads",
      "--quiet",
      "--no-header",
      "--no-annotate",
      "--only-binary",
      ":all:",
      "--python-platform",
      target,
      "--python-version",
      python,
      input
    ),
    error_on_status = FALSE,
    stderr_to_stdout = TRUE
  )
  structure(strsplit(run$stdout, "\n")[[1]], ok = run$status == 0)
}

cuda_or_cpu_only <- "^(nvidia-|tensorflow-cpu|.*cuda)"
counts <- c(passed = 0, failed = 0, skipped = 0)
report <- function(ok, what, detail = "") {
  key <- if (ok) "passed" else "failed"
  counts[[key]] <<- counts[[key]] + 1
  cat(sprintf("%s %s%s\n", if (ok) "ok  " else "FAIL", what, detail))
}
pinned <- function(lines, names) {
  hits <- grep(
    sprintf("^(%s)==", paste(names, collapse = "|")),
    lines,
    value = TRUE
  )
  if (length(hits)) paste0(": ", paste(hits, collapse = ", ")) else ""
}

started <- Sys.time()
for (i in seq_len(nrow(platforms))) {
  platform <- platforms[i, ]
  cat(sprintf("\n== %s (%s) ==\n", platform$name, platform$target))
  asked <- if (with_keras3) requirements_on(platform$os) else list()
  own <- sprintf("keras>=%s", needs$keras)
  for (python in pythons) {
    lines <- resolve(own, platform$target, python)
    pulled <- grep(cuda_or_cpu_only, lines, value = TRUE)
    report(
      attr(lines, "ok") && length(pulled) == 0,
      sprintf("Python %s, customgrad's %s", python, own),
      if (length(pulled)) {
        paste(": pulls", paste(pulled, collapse = ", "))
      } else {
        pinned(lines, "keras")
      }
    )
    for (set in names(asked)) {
      lines <- resolve(asked[[set]]$packages, platform$target, python)
      cat(sprintf(
        "%s Python %s, %s as keras3 asks for it%s\n",
        if (attr(lines, "ok")) "note" else "none",
        python,
        set,
        if (attr(lines, "ok")) {
          pinned(
            lines,
            c("keras", "tensorflow[-a-z]*", "jax", "jaxlib", "torch")
          )
        } else {
          paste0(": ", utils::tail(grep("^hint|cause", lines, value = TRUE), 1))
        }
      ))
    }
  }
  lines <- resolve(own, platform$target, below)
  report(
    !attr(lines, "ok"),
    sprintf(
      "Python %s, below customgrad's range, has no Keras %s",
      below,
      needs$keras
    )
  )
}
cat(sprintf(
  "\nPlatforms: %d passed, %d failed (%.0f s)\n",
  counts[["passed"]],
  counts[["failed"]],
  as.numeric(Sys.time() - started, units = "secs")
))
if (!is.null(counts_file)) {
  writeLines(paste(counts, collapse = " "), counts_file)
}
quit(status = if (counts[["failed"]] > 0) 1 else 0)
