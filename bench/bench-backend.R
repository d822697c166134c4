# One backend's measurements (the backend is fixed per R process).
# Usage: Rscript bench/bench-backend.R BACKEND OUT_DIR [REPS]
# Writes OUT_DIR/BACKEND-steps.csv, BACKEND-ops.csv and BACKEND-memory.csv.
args <- commandArgs(trailingOnly = TRUE)
backend <- args[[1]]
out_dir <- args[[2]]
reps <- if (length(args) >= 3) as.integer(args[[3]]) else 25L
warmup <- 5L
sizes <- c(1, 1e3, 1e6)

suppressPackageStartupMessages(library(customgrad))
use_backend(backend)
invisible(op_exp(0)) # start Keras
ref <- reticulate::import_from_path(
  "reference",
  path = "bench",
  convert = FALSE
)
py_call <- reticulate::py_call

calls <- new.env()
count <- function(impl, what) {
  key <- paste(impl, what)
  calls[[key]] <- (calls[[key]] %||% 0) + 1
}

# customgrad: the README example, with call counters.
customgrad_h <- op_custom_gradient(\(x) {
  count("customgrad", "f")
  e <- op_exp(x)
  grad <- function(..., upstream = NULL) {
    count("customgrad", "grad")
    upstream <- upstream %||% ..1
    op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
  }
  tuple(op_log(1 + e), grad)
})

# The plain reticulate pass-through, as keras3's R op_custom_gradient() does:
# the R closure goes to keras.ops.custom_gradient, ops are called through
# the converting `keras$ops` module.
keras <- reticulate::import("keras")
ops <- keras$ops
passthrough_h <- keras$ops$custom_gradient(function(x) {
  count("passthrough", "f")
  e <- ops$exp(x)
  grad <- function(..., upstream = NULL) {
    count("passthrough", "grad")
    upstream <- upstream %||% ..1
    ops$multiply(upstream, ops$subtract(1.0, ops$divide(1.0, ops$add(1, e))))
  }
  reticulate::tuple(ops$log(ops$add(1, e)), grad)
})

# The floor: the same R code calling a custom gradient written in Python
# (R-driven eager code can't beat it).
floor_h <- local({
  py_log1pexp <- ref$log1pexp
  function(x) py_call(py_log1pexp, x)
})

r_impls <- list(
  floor = floor_h,
  passthrough = passthrough_h,
  customgrad = customgrad_h
)

now_us <- function() as.numeric(Sys.time()) * 1e6

# Each round runs the implementations in a new order: in a fixed order
# each one follows the same neighbour, whose leftovers (the pass-through's
# 1 ms of R callbacks and garbage, cold caches) it pays for every time.
set.seed(20261127)
in_turn <- function(impls) sample(impls)

# The columns that summarise repeated timings `t` (µs).
time_summary <- function(t) {
  data.frame(
    median_us = stats::median(t),
    p10_us = unname(stats::quantile(t, 0.1)),
    p90_us = unname(stats::quantile(t, 0.9)),
    reps = length(t)
  )
}

# The eager step around an R implementation: the same harness for both.
# The harness's Python functions are looked up once.
r_eager_step <- if (backend == "jax") {
  jax_grad_step <- ref$jax_grad_step
  function(h, x) py_call(jax_grad_step, h, x)
} else {
  start <- ref$start
  finish <- ref$finish
  function(h, x) {
    state <- py_call(start, x)
    y <- h(x)
    py_call(finish, state, y, x)
  }
}

measure_eager <- function(impl, x) {
  if (impl == "python") {
    return(reticulate::py_to_r(py_call(ref$timed, ref$python_eager, x)))
  }
  t0 <- now_us()
  r_eager_step(r_impls[[impl]], x)
  now_us() - t0
}

impls <- c("python", "floor", "passthrough", "customgrad")
rows <- list()
add_rows <- function(mode, n, times, per_step_calls, gc_per_step = 0) {
  for (impl in impls) {
    t <- times[[impl]]
    rows[[length(rows) + 1]] <<- data.frame(
      backend = backend,
      mode = mode,
      n = n,
      impl = impl,
      time_summary(t),
      r_callbacks_per_step = per_step_calls[[impl]],
      gc_per_step = if (impl == "customgrad") gc_per_step else 0
    )
  }
}
# Calls from Python into R: the pass-through's f and grad are each one;
# customgrad counts its own.
invisible(customgrad_h(0)) # loads customgrad's Python module
bridge <- reticulate::import("customgrad._bridge", convert = FALSE)
memory <- reticulate::import("customgrad._memory", convert = TRUE)
# R collections customgrad asked for (each a minor gc(), a few ms).
collections <- function() memory$stats()$collections

# Before each round of eager steps, outside the timings, customgrad's memory
# check runs and collects if a collection is due. Inside a step it lands in
# customgrad's call whoever made the garbage: interleaved at n = 1e6 it
# collected 0.16 times a step (20-30 ms each on JAX), freeing the floor's
# and the pass-through's tensors too, where in a loop of its own it
# collects 0.03 times. What its own collections cost a loop is measured in
# the loops below.
between_rounds <- function() invisible(memory$at_boundary())
callbacks <- function(impl) {
  switch(
    impl,
    python = 0,
    floor = 0,
    passthrough = (calls[["passthrough f"]] %||% 0) +
      (calls[["passthrough grad"]] %||% 0),
    customgrad = reticulate::py_to_r(reticulate::py_get_item(
      bridge$r_calls,
      0L
    ))
  )
}

# Eager and compiled steps take at most a few ms: more repetitions cost
# seconds and steady the medians (with 100, one run's ratio at n = 1
# wandered by 0.05).
reps_steps <- max(reps, 300L)
for (n in sizes) {
  x <- py_call(ref$make_input, n)
  times <- lapply(rlang::set_names(impls), function(i) c())
  before <- NULL
  for (i in seq_len(warmup + reps_steps)) {
    if (i == warmup + 1) {
      before <- vapply(impls, callbacks, 1)
      gc_before <- collections()
    }
    between_rounds()
    for (impl in in_turn(impls)) {
      t <- measure_eager(impl, x)
      if (i > warmup) times[[impl]] <- c(times[[impl]], t)
    }
  }
  add_rows(
    "eager",
    n,
    times,
    (vapply(impls, callbacks, 1) - before) / reps_steps,
    (collections() - gc_before) / reps_steps
  )
  cat(sprintf("%s eager n=%g done\n", backend, n))

  if (backend != "torch") {
    # The floor is pure Python once compiled: the same as python.
    compiled <- list(
      python = py_call(ref$compile_step, ref$log1pexp),
      floor = py_call(ref$compile_step, ref$log1pexp),
      passthrough = py_call(ref$compile_step, passthrough_h),
      customgrad = py_call(ref$compile_step, customgrad_h)
    )
    times <- lapply(rlang::set_names(impls), function(i) c())
    for (i in seq_len(warmup + reps_steps)) {
      if (i == warmup + 1) {
        before <- vapply(impls, callbacks, 1)
      }
      for (impl in in_turn(impls)) {
        t <- reticulate::py_to_r(py_call(ref$timed, compiled[[impl]], x))
        if (i > warmup) times[[impl]] <- c(times[[impl]], t)
      }
    }
    add_rows(
      "compiled",
      n,
      times,
      (vapply(impls, callbacks, 1) - before) / reps_steps
    )
    cat(sprintf("%s compiled n=%g done\n", backend, n))
  }
}
utils::write.csv(
  do.call(rbind, rows),
  file.path(out_dir, paste0(backend, "-steps.csv")),
  row.names = FALSE
)

# --- model$fit() per step: the activation in Python, through the plain
# pass-through, through customgrad ------------------------------------------
# One epoch per measurement, implementations interleaved epoch by epoch; the
# same seed and data, so the losses must agree. customgrad's memory check
# runs before each epoch, as before each eager round: the pass-through's
# epochs leave R's callbacks' tensors behind, and with the check only
# inside customgrad's calls its epochs took 1.06x Python's, 1.00x with it
# (PyTorch, 12 epochs each).
fit_epochs <- as.integer(Sys.getenv("BENCH_FIT_EPOCHS", "12"))
fit_warmup <- 2L
fit_data <- py_call(ref$fit_data)
fit_x <- reticulate::py_get_item(fit_data, 0L)
fit_y <- reticulate::py_get_item(fit_data, 1L)
fit_models <- list(
  python = py_call(ref$make_mlp, ref$log1pexp),
  passthrough = py_call(ref$make_mlp, passthrough_h),
  customgrad = py_call(ref$make_mlp, reticulate::r_to_py(customgrad_h))
)
fit_times <- lapply(fit_models, function(m) c())
fit_losses <- lapply(fit_models, function(m) c())
fit_calls <- NULL
for (epoch in seq_len(fit_warmup + fit_epochs)) {
  if (epoch == fit_warmup + 1L) {
    fit_calls <- callbacks("customgrad")
  }
  for (impl in in_turn(names(fit_models))) {
    between_rounds()
    out <- reticulate::py_to_r(
      py_call(ref$fit_epoch, fit_models[[impl]], fit_x, fit_y)
    )
    fit_losses[[impl]] <- c(fit_losses[[impl]], out[[2]])
    if (epoch > fit_warmup) {
      fit_times[[impl]] <- c(fit_times[[impl]], out[[1]])
    }
  }
}
fit_steps <- fit_epochs * 2048 / 64
fit_rows <- do.call(
  rbind,
  lapply(names(fit_models), function(impl) {
    data.frame(
      backend = backend,
      impl = impl,
      time_summary(fit_times[[impl]]),
      final_loss = utils::tail(fit_losses[[impl]], 1),
      max_loss_diff_vs_python = max(abs(
        fit_losses[[impl]] - fit_losses$python
      )),
      r_callbacks_per_step = if (impl == "customgrad") {
        (callbacks("customgrad") - fit_calls) / fit_steps
      } else {
        NA
      }
    )
  })
)
utils::write.csv(
  fit_rows,
  file.path(out_dir, paste0(backend, "-fit.csv")),
  row.names = FALSE
)
cat(sprintf("%s fit done\n", backend))

# --- where an eager step's time goes --------------------------------------
# The same R harness around: a plain Python function (the harness alone),
# a custom gradient whose f and grad do nothing (customgrad's fixed cost:
# the call, one callback, the adapter), and the README example; pure Python
# for scale. Interleaved like the steps.
plain_h_py <- reticulate::py_eval("lambda x: x * 1", convert = FALSE)
breakdown_impls <- list(
  python = NULL,
  harness = function(x) py_call(plain_h_py, x),
  customgrad_noop = op_custom_gradient(\(x) {
    tuple(x * 1, function(upstream) upstream)
  }),
  customgrad = customgrad_h
)
breakdown_rows <- list()
for (n in c(1, 1e6)) {
  x <- py_call(ref$make_input, n)
  times <- lapply(breakdown_impls, function(h) c())
  for (i in seq_len(warmup + reps)) {
    between_rounds()
    for (impl in in_turn(names(breakdown_impls))) {
      t <- if (impl == "python") {
        measure_eager("python", x)
      } else {
        t0 <- now_us()
        r_eager_step(breakdown_impls[[impl]], x)
        now_us() - t0
      }
      if (i > warmup) times[[impl]] <- c(times[[impl]], t)
    }
  }
  breakdown_rows[[length(breakdown_rows) + 1]] <- data.frame(
    backend = backend,
    n = n,
    impl = names(times),
    median_us = vapply(times, stats::median, 1),
    reps = vapply(times, length, 1L)
  )
}
utils::write.csv(
  do.call(rbind, breakdown_rows),
  file.path(out_dir, paste0(backend, "-breakdown.csv")),
  row.names = FALSE
)
cat(sprintf("%s breakdown done\n", backend))

# --- per-op cost: what an R user calls vs the cached Python callable --------
# `op_exp()` is keras3's; `x + 1` is tensorflow R's method on TensorFlow and
# customgrad's on JAX and PyTorch (the column keeps the name "customgrad").
x <- py_call(ref$make_input, 1)
x <- py_call(keras$ops$stop_gradient, x)
k_exp <- reticulate::py_get_attr(
  reticulate::import("keras.ops", convert = FALSE),
  "exp"
)
k_add <- reticulate::py_get_attr(
  reticulate::import("keras.ops", convert = FALSE),
  "add"
)
op_cases <- list(
  exp = list(
    direct = function() py_call(k_exp, x),
    customgrad = function() op_exp(x),
    reticulate_convert = function() ops$exp(x)
  ),
  add = list(
    direct = function() py_call(k_add, x, 1),
    customgrad = function() x + 1,
    reticulate_convert = function() ops$add(x, 1)
  )
)
op_rows <- list()
for (op in names(op_cases)) {
  cases <- op_cases[[op]]
  times <- lapply(cases, function(f) c())
  for (i in seq_len(200 + 20)) {
    for (impl in in_turn(names(cases))) {
      t0 <- now_us()
      cases[[impl]]()
      t <- now_us() - t0
      if (i > 20) times[[impl]] <- c(times[[impl]], t)
    }
  }
  for (impl in names(cases)) {
    t <- times[[impl]]
    op_rows[[length(op_rows) + 1]] <- data.frame(
      backend = backend,
      op = op,
      impl = impl,
      time_summary(t)
    )
  }
}
utils::write.csv(
  do.call(rbind, op_rows),
  file.path(out_dir, paste0(backend, "-ops.csv")),
  row.names = FALSE
)
cat(sprintf("%s per-op done\n", backend))

# --- memory: RSS after 100 and after 10,000 eager customgrad steps ----------
# Garbage waiting for R's collector (up to customgrad.gc_threshold_mb of
# tensors) makes RSS a sawtooth, and the allocator keeps freed memory in a
# pattern that varies from run to run (+-250 MB at n = 1e6 on PyTorch), so a
# raw reading says little. Both readings are taken after R and Python have
# collected and the allocator has returned free memory (bench/reference.py
# collect()): they compare memory still in use. The raw peak is reported too.
settled_rss <- function() {
  gc()
  py_call(ref$collect)
  reticulate::py_to_r(py_call(ref$rss_mb))
}
mem_rows <- list()
for (n in c(1e3, 1e6)) {
  steps <- 10000L
  x <- py_call(ref$make_input, n)
  rss <- c()
  peak <- 0
  for (i in seq_len(steps)) {
    r_eager_step(customgrad_h, x)
    if (i %% 100L == 0L) {
      peak <- max(peak, reticulate::py_to_r(py_call(ref$rss_mb)))
    }
    if (i %in% c(100L, steps)) {
      rss <- c(rss, settled_rss())
    }
  }
  mem_rows[[length(mem_rows) + 1]] <- data.frame(
    backend = backend,
    n = n,
    steps = steps,
    rss_step100_mb = rss[[1]],
    rss_last_mb = rss[[2]],
    growth_mb = rss[[2]] - rss[[1]],
    peak_mb = peak
  )
  cat(sprintf(
    "%s memory n=%g: %.1f MB -> %.1f MB (peak %.1f MB)\n",
    backend,
    n,
    rss[[1]],
    rss[[2]],
    peak
  ))
}
utils::write.csv(
  do.call(rbind, mem_rows),
  file.path(out_dir, paste0(backend, "-memory.csv")),
  row.names = FALSE
)

# --- eager loops, each in its own process: R's collections and peak memory --
# A 2,000-step loop at n = 1e6 (after 20 steps of warm-up): R's collections
# by level and the time R spent collecting, against the step time of the
# same loop in Python. 50 steps at n = 1e7 from a small start: the peak
# resident memory above that start, against Python's loop. Each loop runs in
# a fresh process (bench/loop.R, reference.py); Python, the backend's own
# gradient ("native") and op_grad() alternate, repeated.
python_exe <- reticulate::py_exe()
child_env <- paste0("KERAS_BACKEND=", backend)
# One loop in a child process: the numbers of its last line, in the order
# bench/loop.R prints them (reference.py prints the first two only).
loop_columns <- c(
  "peak_mb",
  "s_per_step",
  "level0",
  "level1",
  "level2",
  "gc_s",
  "asked",
  "asked_full",
  "asked_s"
)
run_loop <- function(command, args) {
  out <- system2(command, args, stdout = TRUE, stderr = FALSE, env = child_env)
  v <- as.numeric(strsplit(trimws(utils::tail(out, 1)), " +")[[1]])
  v <- c(v, rep(NA, length(loop_columns) - length(v)))
  as.data.frame(as.list(stats::setNames(v, loop_columns)))
}
loop_configs <- list(
  list(kind = "loop", n = 1e6, steps = 2000L, warmup = 20L, reps = 1L),
  list(kind = "peak", n = 1e7, steps = 50L, warmup = 0L, reps = 3L)
)
loop_rows <- list()
for (config in loop_configs) {
  for (rep in seq_len(config$reps)) {
    for (route in c("python", "native", "op_grad")) {
      row <- if (route == "python") {
        run_loop(python_exe, c("bench/reference.py", config$n, config$steps))
      } else {
        run_loop(
          "Rscript",
          c("bench/loop.R", config$n, config$steps, route, config$warmup)
        )
      }
      loop_rows[[length(loop_rows) + 1]] <- data.frame(
        backend = backend,
        kind = config$kind,
        n = config$n,
        steps = config$steps,
        route = route,
        rep = rep,
        row
      )
      cat(sprintf(
        "%s %s n=%g %s: peak %.0f MB, %.2f ms/step\n",
        backend,
        config$kind,
        config$n,
        route,
        row$peak_mb,
        1000 * row$s_per_step
      ))
    }
  }
}
utils::write.csv(
  do.call(rbind, loop_rows),
  file.path(out_dir, paste0(backend, "-loops.csv")),
  row.names = FALSE
)
