# customgrad_config() probes all three backends itself, whichever is
# active: run in one backend's process only (tools/test-backend.R).

test_that("customgrad_config() reports the Python, versions and every backend", {
  skip_if_no_backend()
  cfg <- customgrad_config()
  expect_s3_class(cfg, "customgrad_config")
  expect_true(file.exists(cfg$python))
  expect_false(is.na(cfg$versions[["keras"]]))
  expect_setequal(cfg$backends$backend, c("tensorflow", "jax", "torch"))
  # The development environment (make setup) has all three backends.
  expect_true(all(cfg$backends$imports))
  expect_true(all(grepl("cpu", tolower(cfg$backends$devices))))
  expect_identical(cfg$active_backend, config_backend())
  report <- paste(cli::cli_fmt(print(cfg)), collapse = "\n")
  expect_match(report, "Active backend", fixed = TRUE)
  expect_match(report, "torch: imports", fixed = TRUE)
  # R's BLAS, and the advice for it where PyTorch runs on it.
  expect_identical(cfg$blas, extSoftVersion()[["BLAS"]])
  expect_identical(cfg$blas_note, customgrad:::blas_note(cfg$blas))
})

test_that("PyTorch users are told when R's BLAS is the reference BLAS, on Linux only", {
  note <- customgrad:::blas_note
  debian <- "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"
  advice <- note(debian, sysname = "Linux", machine = "x86_64")
  expect_length(advice, 1L)
  expect_match(advice, "R's BLAS is the reference BLAS (", fixed = TRUE)
  expect_match(advice, debian, fixed = TRUE)
  expect_match(advice, "libopenblas0-pthread", fixed = TRUE)
  # No advice: optimised BLAS libraries (as Debian, Fedora and Intel install
  # them), where each library keeps its own BLAS (macOS, Windows), other
  # processors (not measured), and no BLAS reported by R.
  quiet <- data.frame(
    blas = c(
      "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
      "/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3",
      "/usr/lib64/libflexiblas.so.3.4",
      "/opt/intel/oneapi/mkl/latest/lib/libmkl_rt.so.2",
      debian,
      debian,
      debian,
      ""
    ),
    sysname = c(rep("Linux", 4), "Darwin", "Windows", "Linux", "Linux"),
    machine = c(rep("x86_64", 4), "arm64", "x86-64", "aarch64", "x86_64")
  )
  for (i in seq_len(nrow(quiet))) {
    case <- quiet[i, ]
    expect_identical(
      note(case$blas, sysname = case$sysname, machine = case$machine),
      character()
    )
  }
})

test_that("customgrad_config() prints the BLAS advice as it is, with where to read more", {
  cfg <- structure(
    list(
      python = "/opt/py/bin/python",
      chosen_by = "the RETICULATE_PYTHON environment variable",
      versions = c(keras = "3.12.0", torch = "2.13.0"),
      backends = data.frame(backend = "torch", imports = TRUE, devices = "cpu"),
      active_backend = "torch",
      keras_started = FALSE,
      blas = "/home/{u}/blas/libblas.so.3",
      blas_note = customgrad:::blas_note(
        "/home/{u}/blas/libblas.so.3",
        sysname = "Linux",
        machine = "x86_64"
      )
    ),
    class = "customgrad_config"
  )
  withr::local_options(cli.width = 1000) # the section's name on one line
  report <- paste(cli::cli_fmt(print(cfg)), collapse = "\n")
  expect_match(
    report,
    "reference BLAS (/home/{u}/blas/libblas.so.3)",
    fixed = TRUE
  )
  expect_match(
    report,
    "PyTorch slower from R than from Python, on Linux",
    fixed = TRUE
  )
  cfg$blas_note <- character()
  report <- paste(cli::cli_fmt(print(cfg)), collapse = "\n")
  expect_no_match(report, "BLAS", fixed = TRUE)
})

test_that("customgrad_config() does not start Keras: the backend can still be chosen", {
  skip_if_no_backend()
  skip_if_no_callr()
  out <- callr::r(
    function() {
      library(customgrad)
      invisible(customgrad_config())
      started <- customgrad:::keras_backend_in_python()
      keras3::use_backend("jax")
      list(started = started, backend = keras3::config_backend())
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "torch")
  )
  expect_null(out$started)
  expect_identical(out$backend, "jax")
})

test_that("the backend checks leave nothing in the temporary directory", {
  skip_if_no_backend()
  # As under R CMD check: Python's temporary directory is R's.
  withr::local_envvar(TMPDIR = tempdir())
  before <- dir(tempdir())
  probe_backend <- customgrad:::probe_backend
  out <- probe_backend(reticulate::py_config()$python, "torch")
  expect_true(out$imports)
  expect_setequal(dir(tempdir()), before)
})

test_that("customgrad_config() reports the GPUs each backend sees (a fake GPU package set)", {
  skip_if_no_backend()
  # Stand-ins for the backends' packages, first on Python's path, that see
  # two CUDA devices (torch, JAX, TensorFlow) or Apple's MPS (torch on a Mac).
  fake <- withr::local_tempdir()
  module <- function(name, ...) {
    dir.create(file.path(fake, name))
    writeLines(c(...), file.path(fake, name, "__init__.py"))
  }
  module(
    "tensorflow",
    "class _Device:",
    "    def __init__(self, name): self.name = name",
    "class config:",
    "    @staticmethod",
    "    def list_physical_devices():",
    "        return [_Device(f'/physical_device:{d}') for d in ('CPU:0', 'GPU:0', 'GPU:1')]"
  )
  module("jax", "def devices(): return ['cuda:0', 'cuda:1']")
  module(
    "torch",
    "import os",
    "class cuda:",
    "    @staticmethod",
    "    def device_count(): return int(os.environ['FAKE_CUDA'])",
    "class _mps:",
    "    @staticmethod",
    "    def is_available(): return os.environ['FAKE_MPS'] == '1'",
    "class backends:",
    "    mps = _mps"
  )
  withr::local_envvar(PYTHONPATH = fake, FAKE_CUDA = "2", FAKE_MPS = "0")
  python <- reticulate::py_config()$python
  probe <- customgrad:::probe_backend
  expect_identical(
    probe(python, "tensorflow")$devices,
    "/physical_device:CPU:0, /physical_device:GPU:0, /physical_device:GPU:1"
  )
  expect_identical(probe(python, "jax")$devices, "cuda:0, cuda:1")
  expect_identical(probe(python, "torch")$devices, "cpu, cuda:0, cuda:1")
  withr::local_envvar(FAKE_CUDA = "0", FAKE_MPS = "1")
  expect_identical(probe(python, "torch")$devices, "cpu, mps")
})

test_that("customgrad_config() says why its Python was chosen", {
  reason <- customgrad:::python_reason
  expect_match(
    reason(list(
      python = "/home/u/.virtualenvs/r-keras/bin/python",
      forced = "import(\"keras\")"
    )),
    "keras3 (its r-keras environment",
    fixed = TRUE
  )
  expect_match(
    reason(list(
      python = "C:\\Users\\u\\Documents\\.virtualenvs\\r-keras\\Scripts\\python.exe",
      forced = "import(\"keras\")"
    )),
    "r-keras",
    fixed = TRUE
  )
  expect_match(
    reason(list(
      python = "/cache/uv/env/bin/python",
      forced = "py_require()",
      ephemeral = TRUE
    )),
    "provisioned it",
    fixed = TRUE
  )
  expect_identical(
    reason(list(python = "/opt/py/bin/python", forced = "RETICULATE_PYTHON")),
    "the RETICULATE_PYTHON environment variable"
  )
  expect_identical(
    reason(list(python = "/usr/bin/python3", forced = NULL)),
    "reticulate's default search"
  )
})
