# Why the native harness at n = 1e7 runs a full collection every step
# (bench/README.md): after a step calls a closure made in its own frame,
# that frame (every value bound in it) survives the minor collections run
# inside a nested call of later steps, until a level-1 or full one. No
# Keras and no customgrad: a Python object, watched by a weak reference,
# stands in for a tensor; R's own gc() collects. By hand:
#   RETICULATE_PYTHON=.setup/venv/bin/python Rscript bench/retention.R
# prints, per step, which earlier steps' objects were alive after the
# minor collection (empty: none). Measured 2026-11-30 (R 4.2.2, the same
# with R_ENABLE_JIT=0): with a closure of the step's frame called, every
# earlier one ("0 1 2 3"); otherwise, or collected at the top level, none.
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

outside <- function(x) NULL

run("a closure of the step's frame called:", function(make) {
  v <- make()
  (function(x) NULL)(1)
  NULL
})
run("a closure from outside called:", function(make) {
  v <- make()
  outside(1)
  NULL
})
run("nothing called:", function(make) {
  v <- make()
  NULL
})
run(
  "a closure of the step's frame, top level:",
  function(make) {
    v <- make()
    (function(x) NULL)(1)
    NULL
  },
  nested = FALSE
)
