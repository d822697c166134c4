# Why the native harness at n = 1e7 runs a full collection every step
# (bench/README.md): a value R passed to `(function(x) x)` survives the minor
# collection run inside a nested call of the next step, until a level-1 or
# full one. No Keras and no customgrad: a Python object, watched by a weak
# reference, stands in for a tensor; R's own gc() collects. By hand:
#   RETICULATE_PYTHON=.setup/venv/bin/python Rscript bench/retention.R
# prints, per step, which earlier steps' objects were alive after the
# minor collection (empty: none). Measured 2026-11-30: passed to
# `(function(x) x)`, every earlier one ("0 1 2 3"); not passed, none;
# collected at the top level instead, none.
library(reticulate)
py <- py_run_string(
  "
import weakref
class Value: pass
refs = []
def make():
    v = Value()
    refs.append(weakref.ref(v))
    return v
def alive():
    return [i for i, r in enumerate(refs) if r() is not None]
",
  convert = FALSE
)
alive <- function() paste(unlist(py_to_r(py$alive())), collapse = " ")

run <- function(label, step, nested = TRUE) {
  py_run_string("refs.clear()")
  seen <- character()
  make <- function() {
    if (nested) {
      invisible(gc(full = FALSE))
      seen[[length(seen) + 1]] <<- alive()
    }
    py_call(py$make)
  }
  for (i in 1:5) {
    if (!nested) {
      invisible(gc(full = FALSE))
      seen[[length(seen) + 1]] <- alive()
    }
    step(make)
  }
  cat(sprintf("%-44s [%s]\n", label, paste(seen, collapse = "] [")))
}

run("passed to a closure, collected nested:", function(make) {
  v <- make()
  (function(x) x)(v)
  NULL
})
run("not passed, collected nested:", function(make) {
  v <- make()
  NULL
})
run(
  "passed to a closure, collected at top level:",
  function(make) {
    v <- make()
    (function(x) x)(v)
    NULL
  },
  nested = FALSE
)
