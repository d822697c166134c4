# `make bench`: every loop alone in a fresh process (R: bench/loop.R,
# Python: bench/reference.py), timed whole, in BENCH_ROUNDS rounds (default
# 3) in a new order each; then the targets of the issue "An R training step
# at Python's speed", each with a verdict on the medians over rounds of the
# per-process means. Writes bench/results/<date-time>.csv (every process)
# and .md (tables, verdicts, machine load); no earlier run is overwritten.
# Usage: Rscript bench/run.R   (BENCH_BACKENDS="jax torch" for fewer;
# BENCH_CSV=bench/results/<run>.csv summarises that run again, running nothing)
rounds <- as.integer(Sys.getenv("BENCH_ROUNDS", "3"))
backends <- strsplit(
  Sys.getenv("BENCH_BACKENDS", "tensorflow jax torch"),
  " "
)[[1]]
python <- Sys.getenv("RETICULATE_PYTHON", "python3")
stamp <- format(Sys.time(), "%Y-%m-%d-%H%M", tz = "UTC")
out <- file.path("bench", "results", stamp)

# What each process runs: eager steps at n elements (`size` = steps), or
# fit() for `size` epochs (n is 0 for fit(): its size is the MLP's).
cases <- utils::read.table(
  header = TRUE,
  text = "
  what  n    size impl
  eager 1    4000 python
  eager 1    4000 floor
  eager 1    4000 native
  eager 1    4000 op_grad
  eager 1    4000 pystep
  eager 1e6  300  python
  eager 1e6  300  native
  eager 1e6  300  op_grad
  eager 1e6  300  floor
  eager 1e7  30   python
  eager 1e7  30   native
  eager 1e7  30   op_grad
  fresh 1e6  30   python
  fresh 1e6  30   native
  fresh 1e6  30   op_grad
  fresh 1e7  50   python
  fresh 1e7  50   native
  fresh 1e7  50   op_grad
  fit   0    12   python
  fit   0    12   customgrad
  fit   0    12   floor
  exp-eager        1   2000 r
  exp-eager        1   2000 numpy
  exp-eager        1   2000 direct
  exp-compiled     1   2000 r
  exp-compiled     1   2000 numpy
  exp-compiled     1   2000 direct
  exp-eager        1e5 200  r
  exp-eager        1e5 200  numpy
  exp-eager        1e5 200  direct
  exp-compiled     1e5 200  r
  exp-compiled     1e5 200  numpy
  exp-compiled     1e5 200  direct
  besselk-eager    1   2000 r
  besselk-eager    1   2000 direct
  besselk-eager    1e5 200  r
  besselk-eager    1e5 200  direct
  besselk-compiled 1   2000 r
  besselk-compiled 1   2000 numpy
  besselk-compiled 1   2000 direct
  besselk-compiled 1e5 200  r
  besselk-compiled 1e5 200  numpy
  besselk-compiled 1e5 200  direct
  host-fit         0   20   r
  host-fit         0   20   numpy
  host-fit         0   20   eager
  host-fitnet      0   20   r
  host-fitnet      0   20   eager"
)
# The R host op loops (the issue "R's own numerics inside Keras models"):
# `BENCH_ONLY=host` runs them alone, and their targets. `BENCH_ONLY=small`
# runs the eager loops at n = 1 alone, where customgrad's own cost per step
# shows (an A/B of one mechanism, against a full run of the same session).
# `BENCH_ONLY=memory` runs the loops of the memory targets alone (n = 1e6
# and 1e7: Python, the harness, op_grad()), for the ablations of the memory
# rules; `BENCH_LABEL` names what a run measures in its summary.
host_case <- function(what) grepl("^(exp|besselk|host)-", what)
only <- Sys.getenv("BENCH_ONLY")
if (identical(only, "host")) {
  cases <- cases[host_case(cases$what), ]
} else if (identical(only, "small")) {
  cases <- cases[cases$what == "eager" & cases$n == 1, ]
} else if (identical(only, "memory")) {
  cases <- cases[
    cases$what %in% c("eager", "fresh") & cases$n > 1 & cases$impl != "floor",
  ]
}
label <- Sys.getenv("BENCH_LABEL")

load_average <- function() {
  if (!file.exists("/proc/loadavg")) {
    return(NA)
  }
  as.numeric(strsplit(readLines("/proc/loadavg"), " ")[[1]][[1]])
}

run_case <- function(backend, case) {
  size <- format(case$size, scientific = FALSE)
  n <- format(case$n, scientific = FALSE)
  command <- if (host_case(case$what)) {
    parts <- strsplit(case$what, "-")[[1]]
    args <- if (parts[[1]] == "host") {
      # host-fit: the one-weight model, host-fitnet: the network; `eager`
      # is R with run_eagerly = TRUE.
      c(
        "fit",
        size,
        if (parts[[2]] == "fitnet") "net" else "bessel",
        if (case$impl == "eager") "eager"
      )
    } else {
      c(parts, n, size)
    }
    if (case$impl == "numpy") {
      c(python, "bench/host_reference.py", args)
    } else if (case$impl == "direct") {
      c("Rscript", "bench/host.R", args, "direct")
    } else {
      c("Rscript", "bench/host.R", args)
    }
  } else if (case$impl == "python" && case$what == "fit") {
    c(python, "bench/reference.py", "fit", size)
  } else if (case$impl == "python") {
    c(python, "bench/reference.py", case$what, n, size)
  } else if (case$what == "fit") {
    c("Rscript", "bench/loop.R", "fit", size, case$impl)
  } else {
    c("Rscript", "bench/loop.R", case$impl, n, size, case$what)
  }
  lines <- suppressWarnings(system2(
    command[[1]],
    command[-1],
    stdout = TRUE,
    env = c(paste0("KERAS_BACKEND=", backend), "TF_CPP_MIN_LOG_LEVEL=2")
  ))
  pairs <- strsplit(strsplit(trimws(utils::tail(lines, 1)), " ")[[1]], "=")
  values <- stats::setNames(
    as.numeric(vapply(pairs, `[`, "", 2)),
    vapply(pairs, `[`, "", 1)
  )
  if (length(values) < 4 || anyNA(values[1:4])) {
    stop(
      "No result from: ",
      paste(command, collapse = " "),
      "\n",
      paste(lines, collapse = "\n")
    )
  }
  data.frame(
    backend = backend,
    case,
    mean_us = values[["mean_us"]],
    median_us = values[["median_us"]],
    p10_us = values[["p10_us"]],
    p90_us = values[["p90_us"]],
    extra_mb = if ("extra_mb" %in% names(values)) values[["extra_mb"]] else NA,
    loss = if ("loss" %in% names(values)) values[["loss"]] else NA
  )
}

commit <- system2("git", c("rev-parse", "--short", "HEAD"), stdout = TRUE)
from_csv <- Sys.getenv("BENCH_CSV")
if (nzchar(from_csv)) {
  # Summarise a run again from its CSV (its summary failed): nothing runs,
  # and a summary that exists is kept.
  runs <- utils::read.csv(from_csv)
  out <- sub("[.]csv$", "", from_csv)
  if (file.exists(paste0(out, ".md"))) {
    stop(out, ".md exists: results are never overwritten")
  }
  backends <- unique(runs$backend)
  rounds <- max(runs$round)
  commit <- paste(commit, "(summarised again from its CSV)")
  load_before <- NA
  started <- as.POSIXct(basename(out), format = "%Y-%m-%d-%H%M", tz = "UTC")
} else {
  set.seed(as.integer(Sys.time()))
  load_before <- load_average()
  started <- Sys.time()
  rows <- list()
  total <- rounds * length(backends) * nrow(cases)
  for (round in seq_len(rounds)) {
    for (backend in backends) {
      for (i in sample(nrow(cases))) {
        t0 <- Sys.time()
        row <- run_case(backend, cases[i, ])
        rows[[length(rows) + 1]] <- cbind(
          round = round,
          row,
          load = load_average()
        )
        cat(sprintf(
          "[%d/%d] round %d %s %s %s %s: %.1f us/step, %.0f s\n",
          length(rows),
          total,
          round,
          backend,
          cases$what[[i]],
          format(cases$n[[i]]),
          cases$impl[[i]],
          row$mean_us,
          as.numeric(Sys.time() - t0, units = "secs")
        ))
      }
    }
  }
  runs <- do.call(rbind, rows)
  dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
  utils::write.csv(runs, paste0(out, ".csv"), row.names = FALSE)
}

# Medians over rounds of each process's numbers.
key <- interaction(runs$backend, runs$what, runs$n, runs$impl, drop = TRUE)
summary <- do.call(
  rbind,
  lapply(split(runs, key), function(r) {
    data.frame(
      r[1, c("backend", "what", "n", "impl")],
      mean_us = stats::median(r$mean_us),
      mean_range = sprintf("%.0f-%.0f", min(r$mean_us), max(r$mean_us)),
      median_us = stats::median(r$median_us),
      p10_us = stats::median(r$p10_us),
      p90_us = stats::median(r$p90_us),
      extra_mb = stats::median(r$extra_mb),
      loss = stats::median(r$loss)
    )
  })
)
summary <- summary[order(summary$backend, summary$what, summary$n), ]
get <- function(backend, what, n, impl, column = "mean_us") {
  hit <- summary$backend == backend &
    summary$what == what &
    summary$impl == impl &
    summary$n == n
  summary[[column]][hit][[1]]
}

# The targets, as the issue defines them; never changed after a run: the
# ratio of `impl`'s number in `column` to `base`'s, at most `bound`.
targets <- utils::read.table(
  header = TRUE,
  text = "
  label                                     bound what  n   impl       base   column
  'op_grad() n = 1 / Python'                1.5   eager 1   op_grad    python mean_us
  'op_grad() n = 1e6 / Python'              1.1   eager 1e6 op_grad    python mean_us
  'user\\'s harness n = 1 / floor'          1.05  eager 1   native     floor  mean_us
  'user\\'s harness n = 1e6 / Python'       1.1   eager 1e6 native     python mean_us
  'memory above n = 1 peak, native n = 1e6' 2     eager 1e6 native     python extra_mb
  'memory above n = 1 peak, op_grad n = 1e6' 2    eager 1e6 op_grad    python extra_mb
  'memory above n = 1 peak, native n = 1e7' 2     eager 1e7 native     python extra_mb
  'memory above n = 1 peak, op_grad n = 1e7' 2    eager 1e7 op_grad    python extra_mb
  'memory above start, fresh process, native n = 1e6' 2  fresh 1e6 native  python extra_mb
  'memory above start, fresh process, op_grad n = 1e6' 2 fresh 1e6 op_grad python extra_mb
  'memory above start, fresh process, native n = 1e7' 2  fresh 1e7 native  python extra_mb
  'memory above start, fresh process, op_grad n = 1e7' 2 fresh 1e7 op_grad python extra_mb
  'fit() / Python'                          1.02  fit   0   customgrad python mean_us
  'R exp() host op, eager, n = 1 / NumPy'   1.5   exp-eager    1   r numpy mean_us
  'R exp() host op, compiled, n = 1 / NumPy' 1.5  exp-compiled 1   r numpy mean_us
  'R exp() host op, eager, n = 1e5 / NumPy' 1.1   exp-eager    1e5 r numpy mean_us
  'R exp() host op, compiled, n = 1e5 / NumPy' 1.1 exp-compiled 1e5 r numpy mean_us
  'fit() through R besselK() / SciPy'       1.2   host-fit     0   r numpy mean_us
  'fit() through R besselK(), compiled / run_eagerly' 1 host-fit 0 r eager mean_us
  'fit() of a network with R besselK() on top, compiled / run_eagerly' 1 host-fitnet 0 r eager mean_us
  'op_grad() n = 1 / its Python step from R' 1.2  eager        1   op_grad pystep mean_us
  'R exp() host op, eager, n = 1 / user\\'s R' 1.3 exp-eager   1   r direct mean_us
  'R exp() host op, compiled, n = 1 / user\\'s R' 1.3 exp-compiled 1 r direct mean_us
  'R exp() host op, eager, n = 1e5 / user\\'s R' 1.3 exp-eager 1e5 r direct mean_us
  'R exp() host op, compiled, n = 1e5 / user\\'s R' 1.3 exp-compiled 1e5 r direct mean_us
  'R besselK() host op, eager, n = 1 / user\\'s R' 1.3 besselk-eager 1 r direct mean_us
  'R besselK() host op, compiled, n = 1 / user\\'s R' 1.3 besselk-compiled 1 r direct mean_us
  'R besselK() host op, eager, n = 1e5 / user\\'s R' 1.3 besselk-eager 1e5 r direct mean_us
  'R besselK() host op, compiled, n = 1e5 / user\\'s R' 1.3 besselk-compiled 1e5 r direct mean_us"
)
# A partial run (BENCH_ONLY) states the targets and shares of its loops.
in_run <- function(specs) {
  ran <- paste(runs$what, runs$n, runs$impl)
  has <- function(impl) paste(specs$what, specs$n, impl) %in% ran
  specs[has(specs$impl) & has(specs$base), ]
}
targets <- in_run(targets)
ratio <- function(t, b) {
  get(b, t$what, t$n, t$impl, t$column) / get(b, t$what, t$n, t$base, t$column)
}

# One row per entry of `specs` (rows like `targets`), a column per backend:
# `label(t)` names the row and `cells(t, ratios)` formats its ratios.
ratio_table <- function(specs, heading, label, cells) {
  rows <- lapply(seq_len(nrow(specs)), function(i) {
    t <- specs[i, ]
    ratios <- vapply(backends, function(b) ratio(t, b), numeric(1))
    stats::setNames(
      data.frame(label(t), t(cells(t, ratios))),
      c(heading, backends)
    )
  })
  do.call(rbind, rows)
}

verdicts <- ratio_table(
  targets,
  "target",
  function(t) sprintf("%s <= %.2fx", t$label, t$bound),
  function(t, ratios) {
    verdict <- ifelse(ratios <= t$bound, "met", "**missed**")
    sprintf("%.2fx %s", ratios, verdict)
  }
)
met <- sum(grepl(" met", unlist(verdicts[backends])))

# Beside the verdicts, not targets: how much of a ratio to Python the R
# process costs with no customgrad in the step (the floor: the same R code
# around reference.py's log1pexp), and customgrad's share above it.
shares <- utils::read.table(
  header = TRUE,
  text = "
  label                                            what             n   impl       base
  'floor n = 1e6 / Python (no customgrad)'         eager            1e6 floor      python
  'user\\'s harness n = 1e6 / floor n = 1e6'       eager            1e6 native     floor
  'keras3 fit() of the floor / Python'             fit              0   floor      python
  'fit() / keras3 fit() of the floor'              fit              0   customgrad floor
  'R besselK() host op, compiled, n = 1 / SciPy'   besselk-compiled 1   r          numpy
  'R besselK() host op, compiled, n = 1e5 / SciPy' besselk-compiled 1e5 r          numpy"
)
shares <- in_run(shares)
shares$column <- rep("mean_us", nrow(shares))
shares <- if (nrow(shares)) {
  ratio_table(
    shares,
    "ratio",
    function(t) t$label,
    function(t, ratios) sprintf("%.2fx", ratios)
  )
}

md_table <- function(df) {
  if ("n" %in% names(df)) {
    df$n <- ifelse(df$n == 0, "-", format(df$n, scientific = FALSE))
  }
  df[] <- lapply(df, function(x) {
    if (is.numeric(x)) format(signif(x, 4), big.mark = ",") else x
  })
  knitr::kable(df, format = "pipe", row.names = FALSE)
}
losses <- summary[
  summary$what %in% c("fit", "host-fit"),
  c("backend", "what", "impl", "loss")
]
writeLines(
  c(
    sprintf(
      "# make bench, %s UTC, at %s%s",
      format(started, "%Y-%m-%d %H:%M", tz = "UTC"),
      commit,
      if (nzchar(label)) paste0(": ", label) else ""
    ),
    "",
    sprintf(
      "%d rounds; %s; machine load (1-minute average) %.2f at the start, %.2f-%.2f during the run; %.0f minutes.",
      rounds,
      paste(backends, collapse = ", "),
      load_before,
      min(runs$load),
      max(runs$load),
      if (nzchar(from_csv)) {
        NA
      } else {
        as.numeric(Sys.time() - started, units = "mins")
      }
    ),
    "",
    sprintf(
      "## Targets: %d of %d met",
      met,
      length(backends) * nrow(targets)
    ),
    "",
    "Ratios of the medians over rounds of each process's whole-loop mean (memory: of the peak above the process's own n = 1 peak).",
    "",
    md_table(verdicts),
    "",
    "Beside them (not targets): the same R code with the log1pexp written in Python (`floor`), against Python, and customgrad against it.",
    "",
    if (is.null(shares)) "(none in this run)" else md_table(shares),
    "",
    "## Loops",
    "",
    "Per step: the whole-loop mean (median over rounds, with the rounds' range), and the per-step median and 10th-90th percentiles (medians over rounds; fit(): per epoch for Python, none for R). `floor`: the R harness (or keras3's fit()) around log1pexp written in Python.",
    "",
    md_table(summary[c(
      "backend",
      "what",
      "n",
      "impl",
      "mean_us",
      "mean_range",
      "median_us",
      "p10_us",
      "p90_us",
      "extra_mb"
    )]),
    "",
    "fit() final loss (Python's and customgrad's must match):",
    "",
    if (nrow(losses)) md_table(losses) else "(no fit() in this run)"
  ),
  paste0(out, ".md")
)
cat(readLines(paste0(out, ".md")), sep = "\n")
