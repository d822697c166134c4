# What R keeps past a minor collection, and why (bench/README.md). A
# collection finds the frames of the R code running at that moment alive
# and promotes them to an older generation, which minor collections do not
# visit again. R empties a function's frame when it returns, unless
# something still references the frame (R_CleanupEnvir() in R's eval.c);
# a promoted frame that is not emptied keeps what was bound in it
# afterwards, its arguments' values among them, until R's next level-1
# collection (one in ~21). Measured here: a frame in which
# rlang::list2() was evaluated is not emptied, and reticulate's R function
# around a Python callable evaluates rlang::list2(<the arguments>) in its
# caller's frame. So a value computed as the argument of such a function
# (keras3's op_*() call one; `x$backward()` is one) while a collection
# runs (customgrad's runs at the start of a custom-gradient call: in
# `op_sum(f(x))`, while op_sum()'s argument is computed) outlives the
# minor collections after it. No Keras and no customgrad here: a Python
# object, watched by a weak reference, stands in for a tensor; R's own
# gc() collects. By hand:
#   RETICULATE_PYTHON=.setup/venv/bin/python Rscript bench/retention.R
# prints, for each case, how many earlier steps' objects were alive after
# each step. Measured 2026-11-30 (R 4.2.2, rlang 1.0.6, reticulate 1.46;
# the same with R_ENABLE_JIT=0): 0 1 2 3 4 5 where a frame is kept (it
# would drop where R's own level-1 collection fell inside a case), 0 0 0
# 0 0 0 otherwise.
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
def earlier_alive():
    return sum(r() is not None for r in refs[:-1])
identity = lambda v: v
",
  convert = FALSE
)
# The collection runs while the value is being computed, as customgrad's
# does at the start of a custom-gradient call.
make <- function() {
  invisible(gc(full = FALSE))
  py_call(py$make)
}
identity_py <- py$identity # reticulate's R function around it
# By eval(), as reticulate's function does (a direct call, once the JIT
# had compiled the function, kept nothing).
keeps_list2 <- function(v) {
  eval(quote(rlang::list2(v)))
  NULL
}
no_list2 <- function(v) {
  eval(quote(list(v)))
  NULL
}

run <- function(label, step) {
  py_run_string("refs.clear()")
  alive <- integer()
  for (i in 1:6) {
    step()
    alive[[i]] <- py_to_r(py$earlier_alive())
  }
  cat(sprintf("%-58s %s\n", label, paste(alive, collapse = " ")))
}

run("identity_py(make()): a Python function through reticulate", function() {
  identity_py(make())
  NULL
})
run("py_call(py$identity, make())", function() {
  py_call(py$identity, make())
  NULL
})
run("keeps_list2(make()): an R function calling rlang::list2()", function() {
  keeps_list2(make())
  NULL
})
run("no_list2(make()): the same with list()", function() {
  no_list2(make())
  NULL
})
run("v <- make(); then a closure made in the step called", function() {
  v <- make()
  (function() NULL)()
  NULL
})
run("v <- make(); then nothing", function() {
  v <- make()
  NULL
})
