# Helpers for test-layers.R and test-ops-gradient.R: small models, data, and
# runs in a fresh R process or in plain Python.

# Counts R's runs of f: a log1pexp (the naive value, a stable gradient,
# `grad` in keras3's documented form), whose f adds 1 to `counter$f` each
# time R runs it (tracing included).
counted_log1pexp <- function(counter) {
  counter$f <- 0
  op_custom_gradient(function(x) {
    counter$f <- counter$f + 1
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
}

# Regression data with a fixed seed: y = sum of x's columns.
regression_data <- function(n = 64, p = 3, seed = 1) {
  set.seed(seed)
  x <- matrix(rnorm(n * p), ncol = p)
  list(x = x, y = matrix(rowSums(x), ncol = 1))
}

# input (p) -> dense "below" (units) -> `middle` -> dense "above" (1), with
# fixed initial weights, so that two models differing only in `middle`
# start alike.
three_layer_model <- function(middle, units = 4, p = 3) {
  inputs <- keras_input(shape = p)
  outputs <- inputs |>
    layer_dense(units, name = "below", kernel_initializer = "ones") |>
    middle() |>
    layer_dense(1, name = "above", kernel_initializer = "ones")
  keras_model(inputs, outputs)
}

fit_losses <- function(model, data, epochs = 3, ...) {
  model |>
    compile(optimizer = optimizer_sgd(0.01), loss = "mse", ...)
  history <- model |>
    fit(
      data$x,
      data$y,
      epochs = epochs,
      batch_size = 16,
      shuffle = FALSE,
      verbose = 0
    )
  history$metrics$loss
}

# The Python that reticulate runs here (plain Python runs use it without R).
python_exe <- function() {
  reticulate::py_config()$python
}

# Run a Python script (lines) without R: customgrad's Python package on the
# path, this process's backend; returns its output, failing on an error.
run_plain_python <- function(lines, backend = config_backend()) {
  script <- withr::local_tempfile(fileext = ".py")
  writeLines(
    c(
      "import sys",
      sprintf(
        "sys.path.insert(0, %s)",
        encodeString(system.file("python", package = "customgrad"), quote = "'")
      ),
      lines
    ),
    script
  )
  out <- withr::with_envvar(
    c(KERAS_BACKEND = backend, TF_CPP_MIN_LOG_LEVEL = "3"),
    suppressWarnings(system2(
      python_exe(),
      script,
      stdout = TRUE,
      stderr = TRUE
    ))
  )
  status <- attr(out, "status") %||% 0L
  if (status != 0L) {
    stop(paste(c("Python failed:", utils::tail(out, 30)), collapse = "\n"))
  }
  out
}

# A model with custom-gradient layers exported as a TensorFlow SavedModel
# (TensorFlow and JAX) serves the model's own predictions.
expect_export_predicts_same <- function() {
  model <- three_layer_model(\(x) {
    x |>
      layer_custom_gradient(counted_log1pexp(new.env())) |>
      layer_gradient_scale(2)
  })
  x <- matrix(seq(-1, 1, length.out = 6), ncol = 3)
  dir <- withr::local_tempfile()
  model$export(dir, format = "tf_saved_model", verbose = FALSE)
  tf <- reticulate::import("tensorflow")
  served <- tf$saved_model$load(dir)$serve(op_convert_to_tensor(x, "float32"))
  expect_equal(
    as.array(served$numpy()),
    predict(model, x, verbose = 0),
    tolerance = 1e-6
  )
}

# A copy of the saved model at `path` (a .keras file: a zip whose
# config.json holds each layer's config, customgrad's saved traces among
# them) with every saved trace's format number set to `format` (NULL: no
# number, as customgrad 0.1.0 saved them); deleted when `env` ends.
local_trace_format <- function(path, format, env = parent.frame()) {
  out <- withr::local_tempfile(fileext = ".keras", .local_envir = env)
  main <- reticulate::py_run_string(
    paste(
      "def _cg_set_trace_format(path, out, format):",
      "    import json, zipfile",
      "    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, 'w') as dst:",
      "        for item in src.infolist():",
      "            data = src.read(item.filename)",
      "            if item.filename == 'config.json':",
      "                config = json.loads(data)",
      "                for layer in config['config']['layers']:",
      "                    for trace in layer['config'].get('traces', []):",
      "                        trace.pop('format', None)",
      "                        if format is not None:",
      "                            trace['format'] = format",
      "                data = json.dumps(config)",
      "            dst.writestr(item, data)",
      sep = "\n"
    ),
    local = TRUE
  )
  main$`_cg_set_trace_format`(path, out, format)
  out
}

# The format numbers of the saved traces in the model at `path`.
saved_trace_formats <- function(path) {
  config <- reticulate::import("json")$loads(
    reticulate::import("zipfile")$ZipFile(path)$read("config.json")
  )
  unlist(lapply(config$config$layers, function(layer) {
    lapply(layer$config$traces, function(trace) trace$format)
  }))
}
