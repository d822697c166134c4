# `make bench`: each backend in its own R process (bench-backend.R), then
# bench/results/latest.csv, latest.md (ratios and targets) and latest.png.
# BENCH_REPS sets the repetitions per measurement (default 25).
backends <- c("tensorflow", "jax", "torch")
reps <- as.integer(Sys.getenv("BENCH_REPS", "100"))
results <- file.path("bench", "results")
dir.create(results, showWarnings = FALSE, recursive = TRUE)
work <- tempfile("bench")
dir.create(work)

for (backend in backends) {
  cat(sprintf("== %s ==\n", backend))
  status <- system2(
    "Rscript",
    c("bench/bench-backend.R", backend, work, reps),
    env = paste0("KERAS_BACKEND=", backend)
  )
  if (status != 0) stop("the ", backend, " benchmark failed")
}
read_all <- function(what) {
  do.call(
    rbind,
    lapply(backends, function(b) {
      utils::read.csv(file.path(work, sprintf("%s-%s.csv", b, what)))
    })
  )
}
steps <- read_all("steps")
ops <- read_all("ops")
memory <- read_all("memory")
breakdown <- read_all("breakdown")
fit <- read_all("fit")
loops <- read_all("loops")

columns <- c(
  "backend",
  "mode",
  "n",
  "impl",
  "median_us",
  "p10_us",
  "p90_us",
  "reps",
  "gc_per_step"
)
utils::write.csv(
  steps[columns],
  file.path(results, "latest.csv"),
  row.names = FALSE
)
utils::write.csv(ops, file.path(results, "latest-ops.csv"), row.names = FALSE)
utils::write.csv(
  memory,
  file.path(results, "latest-memory.csv"),
  row.names = FALSE
)
utils::write.csv(
  breakdown,
  file.path(results, "latest-breakdown.csv"),
  row.names = FALSE
)
utils::write.csv(fit, file.path(results, "latest-fit.csv"), row.names = FALSE)
utils::write.csv(
  loops,
  file.path(results, "latest-loops.csv"),
  row.names = FALSE
)

# --- ratios, targets, markdown ---------------------------------------------
wide <- stats::reshape(
  steps[c(
    "backend",
    "mode",
    "n",
    "impl",
    "median_us",
    "r_callbacks_per_step",
    "gc_per_step"
  )],
  idvar = c("backend", "mode", "n"),
  timevar = "impl",
  direction = "wide"
)
wide$cg_vs_python <- wide$median_us.customgrad / wide$median_us.python
wide$cg_vs_floor <- wide$median_us.customgrad / wide$median_us.floor
wide$cg_vs_passthrough <- wide$median_us.customgrad / wide$median_us.passthrough
verdict <- function(ok) ifelse(ok, "met", "MISSED")
wide$target <- with(
  wide,
  ifelse(
    mode == "compiled",
    sprintf(
      "<= 1.05x python, 0 callbacks: %s",
      verdict(cg_vs_python <= 1.05 & r_callbacks_per_step.customgrad == 0)
    ),
    ifelse(
      n == 1,
      sprintf("<= 1.2x floor: %s", verdict(cg_vs_floor <= 1.2)),
      ifelse(
        n == 1e6,
        sprintf("<= 1.3x python: %s", verdict(cg_vs_python <= 1.3)),
        ""
      )
    )
  )
)
fmt <- function(x, digits = 0) {
  formatC(x, format = "f", digits = digits, big.mark = ",")
}
lines <- c(
  sprintf(
    "# Benchmark results (%s)",
    format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC")
  ),
  "",
  sprintf(
    "Median µs per step of `sum(log1pexp(x))` forward + backward, float32, %d repetitions after warm-up, implementations interleaved (each round in a new order). Each eager round starts with customgrad's memory check, outside the timings: a collection it finds due runs there, not in the next customgrad call, which would pay for the tensors of all four implementations (the collections column counts them; what customgrad's collections cost a loop of its own: the eager loops below). Machine: %s, %d cores.",
    max(steps$reps),
    R.version$platform,
    parallel::detectCores()
  ),
  "",
  "The floor is the same R harness calling log1pexp written as a Python custom gradient: R-driven eager code can't beat it. Compiled, it is pure Python.",
  "",
  "| backend | mode | n | pure Python | floor | pass-through | customgrad | customgrad / Python | customgrad / floor | customgrad / pass-through | R callbacks per step | collections customgrad ran per step (mostly between rounds) | target |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)
for (i in seq_len(nrow(wide))) {
  w <- wide[i, ]
  lines <- c(
    lines,
    sprintf(
      "| %s | %s | %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2fx | %g | %.3f | %s |",
      w$backend,
      w$mode,
      format(w$n, scientific = w$n >= 1e6),
      fmt(w$median_us.python),
      fmt(w$median_us.floor),
      fmt(w$median_us.passthrough),
      fmt(w$median_us.customgrad),
      w$cg_vs_python,
      w$cg_vs_floor,
      w$cg_vs_passthrough,
      w$r_callbacks_per_step.customgrad,
      w$gc_per_step.customgrad,
      w$target
    )
  )
}
fit_us <- function(b, impl) fit$median_us[fit$backend == b & fit$impl == impl]
lines <- c(
  lines,
  "",
  sprintf(
    "`model$fit()`, µs per step (median over %d interleaved epochs of 32 steps; p10-p90 in brackets): the MLP 32 -> Dense 64 -> log1pexp -> Dense 64 -> log1pexp -> Dense 1, with log1pexp written in Python, through the plain pass-through (keras3's style) and through customgrad. Each epoch starts with customgrad's memory check, outside the timings, as the eager rounds do. Same seed and data: the losses must match. Target: customgrad <= 1.05x Python.",
    fit$reps[[1]]
  ),
  "",
  "| backend | Python | pass-through | customgrad | customgrad / Python | pass-through / Python | customgrad / pass-through | max loss difference vs Python | R callbacks per step | target |",
  "|---|---|---|---|---|---|---|---|---|---|"
)
for (b in backends) {
  d <- fit[fit$backend == b, ]
  row <- function(impl) d[d$impl == impl, ]
  span <- function(impl) {
    r <- row(impl)
    sprintf("%s (%s-%s)", fmt(r$median_us), fmt(r$p10_us), fmt(r$p90_us))
  }
  ratio <- fit_us(b, "customgrad") / fit_us(b, "python")
  lines <- c(
    lines,
    sprintf(
      "| %s | %s | %s | %s | %.2fx | %.2fx | %.2fx | %.2g | %g | <= 1.05x: %s |",
      b,
      span("python"),
      span("passthrough"),
      span("customgrad"),
      ratio,
      fit_us(b, "passthrough") / fit_us(b, "python"),
      fit_us(b, "customgrad") / fit_us(b, "passthrough"),
      row("customgrad")$max_loss_diff_vs_python,
      row("customgrad")$r_callbacks_per_step,
      verdict(ratio <= 1.05)
    )
  )
}
ops_wide <- stats::reshape(
  ops[c("backend", "op", "impl", "median_us")],
  idvar = c("backend", "op"),
  timevar = "impl",
  direction = "wide"
)
lines <- c(
  lines,
  "",
  "Per-op cost at n = 1, µs, of what an R user writes: keras3's `op_exp()`, and `x + 1` through tensorflow R's method (TensorFlow) or customgrad's (JAX, PyTorch); target: at most 1.2x the cached callable:",
  "",
  "| backend | op | cached Python callable | R user's call | ratio | `keras$ops$...` with conversion |",
  "|---|---|---|---|---|---|"
)
for (i in seq_len(nrow(ops_wide))) {
  o <- ops_wide[i, ]
  lines <- c(
    lines,
    sprintf(
      "| %s | %s | %s | %s | %.2fx | %s |",
      o$backend,
      if (o$op == "add") "`x + 1` / add" else "`op_exp(x)` / exp",
      fmt(o$median_us.direct),
      fmt(o$median_us.customgrad),
      o$median_us.customgrad / o$median_us.direct,
      fmt(o$median_us.reticulate_convert)
    )
  )
}
lines <- c(
  lines,
  "",
  "Where an eager step's time goes, median µs (the same R harness around the last three; each adds one thing to the column before):",
  "",
  "| backend | n | pure Python | harness around a plain Python function (`x * 1`) | customgrad, `f` = `x * 1` and `grad` returning upstream | customgrad, the README `f` and `grad` |",
  "|---|---|---|---|---|---|"
)
for (i in seq(1, nrow(breakdown), by = 4)) {
  d <- breakdown[i:(i + 3), ]
  us <- function(impl) fmt(d$median_us[d$impl == impl])
  lines <- c(
    lines,
    sprintf(
      "| %s | %s | %s | %s | %s | %s |",
      d$backend[[1]],
      format(d$n[[1]], scientific = d$n[[1]] >= 1e6),
      us("python"),
      us("harness"),
      us("customgrad_noop"),
      us("customgrad")
    )
  )
}
lines <- c(
  lines,
  "",
  "Memory: resident set size of the R process during eager customgrad steps, read after R and Python collected garbage and the allocator returned free memory (target: growth under 20 MB); peak: the highest reading, every 100 steps, without collecting:",
  "",
  "| backend | n | steps | RSS at step 100 (MB) | RSS at last step (MB) | growth (MB) | peak (MB) |",
  "|---|---|---|---|---|---|---|"
)
for (i in seq_len(nrow(memory))) {
  m <- memory[i, ]
  lines <- c(
    lines,
    sprintf(
      "| %s | %s | %s | %s | %s | %+.1f | %s |",
      m$backend,
      format(m$n, scientific = m$n >= 1e6),
      fmt(m$steps),
      fmt(m$rss_step100_mb, 1),
      fmt(m$rss_last_mb, 1),
      m$growth_mb,
      fmt(m$peak_mb, 1)
    )
  )
}
lines <- c(
  lines,
  "",
  "Eager loops, each in a fresh process (`bench/loop.R`; Python: `reference.py`), the loop holding each step's gradient as users write it: through the backend's own gradient (native) or `op_grad()`. *Loop*: 2,000 steps at n = 1e6 after 20 of warm-up; R's collections by level during the loop (R's own report, `gcinfo()`), the collections customgrad asked for, and the collector's time as a share of the loop: R's own measure (`gc.time()`) and, in brackets, the time customgrad's collections took with the finalizers they ran, which free the tensors R held (work a Python loop does in its steps: `bench/freeing.py`; on JAX, freeing 38 gradients at once takes 13-20 ms, and a Python loop that frees them 38 at a time takes 0.85-0.87x the time a step of one that frees each at once). Target: no full collection, R's collector time <= 5%. *Peak*: 50 steps at n = 1e7, the peak resident set above the start, median of the repetitions (range in brackets). Target: <= 2x Python's.",
  "",
  "| backend | loop | route | ms per step | / Python | collections per 100 steps (level 0 / 1 / full) | asked by customgrad (full) | collector time | peak MB | peak / Python | target |",
  "|---|---|---|---|---|---|---|---|---|---|---|"
)
for (b in backends) {
  for (kind in c("loop", "peak")) {
    d <- loops[loops$backend == b & loops$kind == kind, ]
    py <- d[d$route == "python", ]
    for (route in c("native", "op_grad")) {
      r <- d[d$route == route, ]
      per100 <- function(x) 100 * sum(x) / sum(r$steps)
      peak_ratio <- stats::median(r$peak_mb) / stats::median(py$peak_mb)
      loop_s <- sum(r$s_per_step * r$steps)
      gc_share <- sum(r$gc_s) / loop_s
      asked_share <- sum(r$asked_s) / loop_s
      target <- if (kind == "loop") {
        sprintf(
          "no full, <= 5%%: %s",
          verdict(sum(r$level2) == 0 & gc_share <= 0.05)
        )
      } else {
        sprintf("<= 2x: %s", verdict(peak_ratio <= 2))
      }
      lines <- c(
        lines,
        sprintf(
          "| %s | %s, n = %s | %s | %.2f | %.2fx | %.1f / %.1f / %.1f | %d (%d) | %.1f%% (%.1f%%) | %s (%s-%s) | %.2fx | %s |",
          b,
          kind,
          format(r$n[[1]], scientific = TRUE),
          route,
          1000 * stats::median(r$s_per_step),
          stats::median(r$s_per_step) / stats::median(py$s_per_step),
          per100(r$level0),
          per100(r$level1),
          per100(r$level2),
          as.integer(sum(r$asked)),
          as.integer(sum(r$asked_full)),
          100 * gc_share,
          100 * asked_share,
          fmt(stats::median(r$peak_mb)),
          fmt(min(r$peak_mb)),
          fmt(max(r$peak_mb)),
          peak_ratio,
          target
        )
      )
    }
  }
}
writeLines(lines, file.path(results, "latest.md"))

# --- plot: time vs n, log-log, one panel per backend -------------------------
grDevices::png(
  file.path(results, "latest.png"),
  width = 1500,
  height = 520,
  res = 110
)
graphics::par(mfrow = c(1, 3), mar = c(4.5, 4.5, 3, 1))
colours <- c(
  python = "black",
  floor = "darkgreen",
  passthrough = "firebrick",
  customgrad = "steelblue"
)
for (b in backends) {
  d <- steps[steps$backend == b, ]
  graphics::plot(
    NA,
    log = "xy",
    xlim = range(d$n),
    ylim = range(c(d$p10_us, d$p90_us)),
    xlab = "n (elements)",
    ylab = "µs per step (median)",
    main = b
  )
  for (impl in names(colours)) {
    for (mode in c("eager", "compiled")) {
      s <- d[d$impl == impl & d$mode == mode, ]
      if (nrow(s) == 0) {
        next
      }
      graphics::lines(
        s$n,
        s$median_us,
        col = colours[[impl]],
        lty = if (mode == "eager") 1 else 2,
        lwd = 2
      )
      graphics::points(s$n, s$median_us, col = colours[[impl]], pch = 19)
    }
  }
  graphics::legend(
    "topleft",
    legend = c(names(colours), "eager", "compiled"),
    bty = "n",
    col = c(colours, "grey40", "grey40"),
    lty = c(1, 1, 1, 1, 1, 2),
    lwd = 2
  )
}
grDevices::dev.off()
cat(readLines(file.path(results, "latest.md")), sep = "\n")
