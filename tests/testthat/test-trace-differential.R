# A differential test of tracing: every op_*() the installed keras3 exports,
# called with generated inputs eagerly and through op_compile(),
# op_value_and_grad() and a custom gradient's f and grad, which trace R
# closures on Keras symbolic tensors and replay them. A traced route must
# give eager's numbers (after a fallback message, if it falls back to R) or
# raise a classed customgrad error: never a raw error, never another
# number. Inputs come from the ops' formals (helper-differential.R); the
# report (counts per route and outcome, every raw and different case, the
# backend's own failures) is printed.

test_that("traced routes of every keras3 op compute what eager R computes", {
  skip_if_no_backend()
  # The ops the test can't call, each with the reason.
  uncallable <- c(
    op_custom_gradient = "the transform under test (customgrad's replaces keras3's)"
  )
  ops <- differential_ops()
  expect_true(all(names(uncallable) %in% ops))
  # Overrides of ops keras3 no longer exports would be dead code.
  expect_true(all(names(differential_overrides) %in% ops))

  withr::local_seed(20260501)
  local_fast_compiling()
  started <- proc.time()[["elapsed"]]
  results <- run_differential(setdiff(ops, names(uncallable)))
  elapsed <- proc.time()[["elapsed"]] - started
  print_differential_report(results, elapsed)

  # Every op was called (a newer keras3's new op may need a generator).
  uncalled <- results[results$outcome == "uncallable", ]
  for (i in seq_len(nrow(uncalled))) {
    fail(sprintf(
      "%s can't be called: %s (add a generator or an override)",
      uncalled$op[[i]],
      uncalled$detail[[i]]
    ))
  }
  # Neither raw errors, nor other numbers, nor failures of the test itself.
  bad <- results[results$outcome %in% c("raw", "different", "harness"), ]
  for (i in seq_len(nrow(bad))) {
    fail(sprintf(
      "%s [case %s, route %s] %s: %s",
      bad$op[[i]],
      bad$case[[i]],
      bad$route[[i]],
      bad$outcome[[i]],
      bad$detail[[i]]
    ))
  }
  expect_identical(nrow(bad), 0L)
  # The generated inputs suit nearly every op: this tests tracing.
  eager <- results[results$route == "eager", ]
  expect_gt(mean(eager$outcome == "same"), 0.95)
})
