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

# --- Peak memory of an eager loop -------------------------------------------

# The README's log1pexp, in a loop of `steps` eager steps on an n-element
# float32 tensor, in a child process: R with customgrad (`route` "native":
# the backend's own gradient, as its users write it; "op_grad"; see
# eager-loop.R), or Python with Keras' own custom gradient. Each starts the
# loop after three steps on a 4-element tensor (imports, traces) and
# reports the peak resident set above that baseline, in MB. Returns the
# process (see peak_extra_mb()).
start_r_loop <- function(n, steps, route) {
  callr::r_bg(
    function(n, steps, route, eager_loop) {
      library(keras3)
      library(customgrad)
      source(eager_loop)
      log1pexp <- readme_log1pexp()
      step <- eager_step(log1pexp, op_ones(4) * 0.5, route)
      for (i in 1:3) {
        step()
      }
      base <- process_mb("VmRSS")
      step <- eager_step(log1pexp, op_ones(n) * 0.5, route)
      for (i in seq_len(steps)) {
        step()
      }
      process_mb("VmHWM") - base
    },
    args = list(
      n = n,
      steps = steps,
      route = route,
      eager_loop = normalizePath(test_path("eager-loop.R"))
    ),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend())
  )
}

start_python_loop <- function(n, steps) {
  script <- tempfile(fileext = ".py")
  writeLines(
    c(
      "import sys",
      "import keras",
      "from keras import ops",
      "backend = keras.config.backend()",
      "",
      "@ops.custom_gradient",
      "def log1pexp(x):",
      "    e = ops.exp(x)",
      "    def grad(*args, upstream=None):",
      "        if upstream is None:",
      "            (upstream,) = args",
      "        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))",
      "    return ops.log(1 + e), grad",
      "",
      "def status(field):",
      "    with open('/proc/self/status') as f:",
      "        for line in f:",
      "            if line.startswith(field + ':'):",
      "                return int(line.split()[1]) / 1024",
      "",
      "def make_step(x):",
      "    if backend == 'tensorflow':",
      "        import tensorflow as tf",
      "        def step():",
      "            with tf.GradientTape() as tape:",
      "                tape.watch(x)",
      "                s = ops.sum(log1pexp(x))",
      "            return tape.gradient(s, x)",
      "    elif backend == 'jax':",
      "        import jax",
      "        g = jax.grad(lambda v: ops.sum(log1pexp(v)))",
      "        def step():",
      "            return g(x).block_until_ready()",
      "    else:",
      "        x = x.detach().requires_grad_(True)",
      "        def step():",
      "            x.grad = None",
      "            ops.sum(log1pexp(x)).backward()",
      "            return x.grad",
      "    return step",
      "",
      "n, steps = int(sys.argv[1]), int(sys.argv[2])",
      "step = make_step(ops.ones((4,)) * 0.5)",
      "for _ in range(3):",
      "    step()",
      "base = status('VmRSS')",
      "step = make_step(ops.ones((n,)) * 0.5)",
      "for _ in range(steps):",
      "    step()",
      "print(status('VmHWM') - base)"
    ),
    script
  )
  processx::process$new(
    python_exe(),
    c(script, format(n, scientific = FALSE), steps),
    env = c(
      "current",
      KERAS_BACKEND = config_backend(),
      TF_CPP_MIN_LOG_LEVEL = "3"
    ),
    stdout = "|",
    stderr = "|",
    cleanup_tree = TRUE
  )
}

# The peak above the baseline that a loop process reports, in MB; waits at
# most `timeout` seconds.
peak_extra_mb <- function(process, timeout = 900) {
  process$wait(timeout * 1000)
  if (process$is_alive()) {
    process$kill_tree()
    stop("The loop did not finish in ", timeout, " s.")
  }
  if (inherits(process, "r_process")) {
    return(process$get_result())
  }
  out <- process$read_all_output_lines()
  if (process$get_exit_status() != 0) {
    stop(paste(
      c("Python failed:", process$read_all_error_lines()),
      collapse = "\n"
    ))
  }
  as.numeric(utils::tail(out, 1))
}
