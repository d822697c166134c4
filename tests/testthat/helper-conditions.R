# Helpers for test-conditions.R: a way to meet every customgrad error class.

# Raise the exception of class `name` of customgrad's Python module, with
# `details`, and bring it back to R the way customgrad's calls do.
raise_python_error <- function(name, ...) {
  errors <- customgrad:::customgrad_py("errors")
  exc <- do.call(reticulate::py_get_attr(errors, name), list(...))
  raiser <- reticulate::py_run_string(
    "def _raise(e):\n    raise e\n",
    local = TRUE,
    convert = FALSE
  )$`_raise`
  customgrad:::with_python_errors(raiser(exc), call = quote(h(x)))
}

new_doubler <- function() {
  op_custom_gradient(function(x) tuple(x * 2, function(upstream) upstream * 2))
}

# One way to meet each class, as a user would where that is practical:
# functions are named, as in users' code, so that errors can name the call.
error_triggers <- list(
  not_function = function() op_custom_gradient(1),
  # float32 inputs where the message names the dtype: R numbers become
  # float64 tensors on TensorFlow only.
  f_result = function() {
    h <- op_custom_gradient(function(x) x * 2)
    h(op_convert_to_tensor(1, "float32"))
  },
  grad_not_function = function() {
    h <- op_custom_gradient(function(x) tuple(x, 1))
    h(1)
  },
  grad_signature = function() {
    h <- op_custom_gradient(function(x) tuple(x * 2, function() 1))
    h(1)
  },
  grad_count = function() {
    h <- op_custom_gradient(function(x) {
      tuple(x * 2, function(upstream) list(upstream, upstream))
    })
    op_grad(h)(1)
  },
  grad_shape = function() {
    h <- op_custom_gradient(function(x) {
      tuple(op_sum(x * 2), function(upstream) op_ones(3))
    })
    op_grad(h)(c(1, 2))
  },
  grad_structure = function() {
    h <- op_custom_gradient(function(x, mode) {
      tuple(x * 2, function(upstream) list(upstream, upstream))
    })
    op_grad(h)(1, "fast")
  },
  grad_variables = function() customgrad:::abort_grad_variables(2),
  input = function() {
    h <- new_doubler()
    h(1i)
  },
  trace_arg = function() op_custom_gradient(sin, trace = "yes"),
  trace = function() {
    h <- op_custom_gradient(
      function(x) tuple(x * as.numeric(x), function(upstream) upstream),
      trace = "strict"
    )
    h(1)
  },
  trace_read = function() customgrad:::run_traced(stats::runif(1)),
  symbolic_tensor = function() as.numeric(keras_input(shape = 2)),
  unsupported_op = function() gamma(op_convert_to_tensor(c(1, 2))),
  wrt = function() op_grad(function(x) x, wrt = 0),
  wrt_dtype = function() {
    g <- op_grad(function(x) op_sum(x))
    g(op_convert_to_tensor(1:2))
  },
  not_scalar = function() {
    g <- op_grad(function(x) x * 2)
    g(op_convert_to_tensor(c(1, 2), "float32"))
  },
  upstream = function() {
    g <- op_grad(function(x) x * 2, upstream = c(1, 2, 3))
    g(c(1, 2))
  },
  gradcheck = function() {
    h <- op_custom_gradient(function(x) {
      tuple(sin(x), function(upstream) upstream * sin(x))
    })
    gradcheck(h, x = c(0.5, 1), error = TRUE)
  },
  gradcheck_input = function() gradcheck(sin),
  gradcheck_structure = function() {
    raise_python_error("GradcheckError", expected = 1L, returned = 2L)
  },
  bad_argument = function() gradcheck(sin, x = 1, eps = -1),
  option = function() {
    withr::local_options(customgrad.max_traces = 0)
    h <- new_doubler()
    h(1)
  },
  backend_unknown = function() {
    customgrad:::ensure_python_modules(quote(h(x)), "theano", missing = NULL)
  },
  backend_started = function() {
    other <- setdiff(c("tensorflow", "jax"), config_backend())[[1]]
    withr::local_envvar(KERAS_BACKEND = other)
    h <- new_doubler()
    h(1)
  },
  backend_unsupported = function() {
    raise_python_error("BackendError", backend = "numpy")
  },
  # Met on JAX only (test-model-steps.R meets it there).
  weights_lost = function() {
    raise_python_error("WeightsLostError")
  },
  # Which modules are missing is given: this Python has them all.
  backend_missing = function() {
    customgrad:::ensure_python_modules(quote(h(x)), "torch", missing = "torch")
  },
  python_missing = function() {
    customgrad:::ensure_python_modules(quote(h(x)), "jax", missing = "keras")
  },
  python_version = function() {
    config <- list(
      python = "/home/me/.virtualenvs/r-keras/bin/python",
      version = "3.12"
    )
    customgrad:::ensure_python_versions(config, quote(h(x)), keras = "3.8.0")
  },
  na = function() {
    h <- new_doubler()
    h(c(1, NA))
  },
  grad_dtype = function() {
    h <- op_custom_gradient(function(x) tuple(x * 2, function(upstream) NA))
    op_grad(h)(op_convert_to_tensor(1, "float32"))
  },
  # A real one is met through keras3's load_model() (test-layers.R), with
  # the Python message: this is the message R writes for it.
  load_function = function() {
    raise_python_error(
      "FunctionNotFoundError",
      `function` = "log1pexp",
      layer = "custom_gradient",
      reason = "no_traces"
    )
  },
  # Through keras3's save_model(): the message R writes for it all the same.
  not_serializable = function() {
    local_vignettes_installed(TRUE) # the same message however installed
    h <- new_doubler()
    model <- keras_model_sequential(input_shape = 2) |>
      layer_lambda(h, name = "doubled")
    save_model(model, withr::local_tempfile(fileext = ".keras"))
  },
  load_format = function() {
    raise_python_error(
      "SavedFormatError",
      `function` = "log1pexp",
      layer = "custom_gradient",
      reason = "newer",
      format = 2L,
      oldest = 1L,
      newest = 1L
    )
  },
  thread = function() raise_python_error("ThreadError", thread = "worker"),
  # Real ones, inside compiled computations: test-host-*.R.
  value_like = function() {
    op_custom_gradient(function(x) tuple(x, \(up) up), value_like = "y")
  },
  # Real ones: test-distributed*.R (which depend on the backend in use).
  distributed = function() {
    customgrad:::ensure_distributed_backend(
      "torch",
      num_processes = 1L,
      local_devices = 2L,
      call = quote(use_distributed(local_devices = 2))
    )
  },
  distributed_started = function() {
    customgrad:::abort_distributed_started(
      "jax",
      call = quote(use_distributed(local_devices = 2))
    )
  },
  # The backend's own errors in f and grad (their messages are the
  # backend's: a snapshot per backend).
  f = function() {
    h <- op_custom_gradient(function(x, label) {
      tuple(op_multiply(x, label), function(upstream) upstream)
    })
    h(1, "a")
  },
  grad = function() {
    h <- op_custom_gradient(function(x) {
      tuple(x * 2, function(upstream) op_multiply(upstream, "a"))
    })
    op_grad(h)(1)
  },
  recursion = function() {
    raise_python_error("RecursionLimitError", depth = 65L, limit = 64L)
  },
  # Forward mode through a custom gradient (test-transforms.R has the rest).
  transform = function() {
    h <- op_custom_gradient(function(x) tuple(x * x, \(upstream) upstream))
    x <- op_convert_to_tensor(1, "float32")
    keras$ops$jvp(h, tuple(x), tuple(x))
  },
  internal = function() {
    raise_python_error("ProtocolError", problem = "a reply without `value`.")
  }
)

# The Python in use, which differs between machines, out of snapshots.
scrub_python_path <- function(lines) {
  gsub("Python: '[^']*'", "Python: '<python>'", lines)
}

# Snapshot variants for messages that name the backend in use.
snapshot_variant <- function(class) {
  per_backend <- c("backend_started", "f", "grad", "transform")
  if (class %in% per_backend) config_backend() else NULL
}
