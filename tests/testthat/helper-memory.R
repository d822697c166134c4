# Helpers for test-custom-gradient-memory.R: what a dropped function
# releases, and the peak memory of long eager loops.

# A custom-gradient function made the way users write factories: `f`
# captures an R environment and a Python object, and the factory's frame
# holds the function too (the case an R -> Python -> R cycle kept alive).
# Returns the function and weak references to both captured objects
# (`refs`).
captured_function_factory <- function(trace = TRUE) {
  big <- new.env()
  big$values <- runif(1e5)
  py_object <- reticulate::py_eval(
    "type('Captured', (), {})()",
    convert = FALSE
  )
  h <- op_custom_gradient(
    function(x) {
      scale <- 2 + 0 * big$values[[1]] + 0 * length(py_object)
      tuple(x * scale, function(upstream) upstream * scale)
    },
    trace = trace
  )
  weakref <- reticulate::import("weakref", convert = FALSE)
  list(
    h = h,
    refs = list(r = rlang::new_weakref(big), python = weakref$ref(py_object))
  )
}

# Expects the objects behind `refs` (see captured_function_factory()) to
# be `released`, or not, after R's collector ran: twice, as a release that
# goes through Python takes two (the first finalises R's reference to a
# Python object, which then drops its reference to an R object).
expect_captured_released <- function(refs, released) {
  gc()
  gc()
  gone <- c(
    r = is.null(rlang::wref_key(refs$r)),
    python = reticulate::py_is_null_xptr(refs$python) ||
      inherits(reticulate::py_call(refs$python), "python.builtin.NoneType")
  )
  expect_identical(gone, c(r = released, python = released))
}

# A fake device allocator (fake_device.py, shared with the pytest suite):
# `$track(x)` counts x's bytes while it lives, as a GPU's allocator counts
# what is alive on it; `$used`, `$peak`, and `$reader` (a memory count for
# customgrad._memory).
fake_device <- function() {
  customgrad:::customgrad_py() # customgrad's module on Python's path first
  module <- reticulate::import_from_path(
    "fake_device",
    # tests/testthat, also from tests/soak
    testthat::test_path("..", "testthat"),
    convert = FALSE
  )
  module$FakeDevice()
}

# Runs `code` as on macOS or Windows, with none of Linux's probes (glibc's
# count), and with `device` (a memory count, e.g. a fake_device()'s
# `$reader`) as the backend's device count where given, and a threshold of
# `threshold_mb`; restores all after.
without_linux_probes <- function(threshold_mb, code, device = NULL) {
  customgrad:::customgrad_py() # registers the default threshold first
  memory <- reticulate::import("customgrad._memory", convert = FALSE)
  adapter <- memory$`_backend`$adapter()
  saved <- list(
    glibc = reticulate::py_get_attr(memory, "_glibc_in_use"),
    device = reticulate::py_get_attr(adapter, "device_memory_in_use")
  )
  reticulate::py_set_attr(
    memory,
    "_glibc_in_use",
    reticulate::py_eval("lambda: None")
  )
  if (!is.null(device)) {
    reticulate::py_set_attr(adapter, "device_memory_in_use", function() device)
  }
  set_threshold <- function(mb) {
    reticulate::py_set_attr(memory, "_reader", reticulate::r_to_py(list()))
    customgrad:::set_collector(mb)
  }
  set_threshold(threshold_mb)
  on.exit({
    reticulate::py_set_attr(memory, "_glibc_in_use", saved$glibc)
    reticulate::py_set_attr(adapter, "device_memory_in_use", saved$device)
    set_threshold(getOption("customgrad.gc_threshold_mb", 64))
  })
  force(code)
}

# Make the collections of the calling test depend on the bytes handed to R
# only: the process-memory trigger (pytest tests it) moves by more than
# these tests' thresholds on its own. Restores it, and R's collector with
# the option's threshold, when the test ends.
bytes_only_collections <- function(env = parent.frame()) {
  memory <- reticulate::import("customgrad._memory", convert = FALSE)
  measure <- reticulate::py_get_attr(memory, "_memory_now")
  reticulate::py_set_attr(
    memory,
    "_memory_now",
    reticulate::py_eval("lambda fresh=False: None")
  )
  withr::defer(reticulate::py_set_attr(memory, "_memory_now", measure), env)
  withr::defer(customgrad:::set_collector(), env)
  memory
}

# The same with a memory count that grows by `bytes` at each boundary and
# falls back when R collects: collections fall due on every backend, JAX's
# tracers included (their bytes are not counted).
growing_memory_collections <- function(bytes, env = parent.frame()) {
  memory <- bytes_only_collections(env)
  fake <- reticulate::py_run_string(
    paste0(
      "def memory_now(fresh=False, grown=[0]):\n",
      "    grown[0] = 0 if fresh else grown[0] + ",
      bytes,
      "\n",
      "    return grown[0]\n"
    ),
    local = TRUE,
    convert = FALSE
  )
  reticulate::py_set_attr(memory, "_memory_now", fake$memory_now)
  memory
}

# 150 eager steps of the naive log1pexp on 400 kB tensors, run as on macOS
# or Windows (without_linux_probes(), threshold 2 MB), with a fake device
# count if `device`. The gradients the backend hands to R are tracked on
# the fake device, which customgrad never sees. Returns the collections
# customgrad made and the peak of live gradients, in tensors.
fake_device_loop <- function(device) {
  source(test_path("..", "testthat", "eager-loop.R"), local = TRUE)
  fake <- fake_device() # customgrad's module on Python's path first
  memory <- reticulate::import("customgrad._memory", convert = FALSE)
  collections <- function() reticulate::py_to_r(memory$stats())$collections
  f <- naive_log1pexp()
  x <- op_ones(1e5) * 0.5 # 400 kB a tensor
  without_linux_probes(threshold_mb = 2, device = if (device) fake$reader, {
    step <- eager_step(f, x, "native")
    before <- collections()
    for (i in 1:150) {
      g <- fake$track(step())
    }
    made <- collections() - before
  })
  list(collections = made, peak = reticulate::py_to_r(fake$peak) / 4e5)
}
