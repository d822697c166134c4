# A backend's error while f or grad run (backend-errors.R).

test_that("a backend's error in f or grad shows the call in f that raised it, not reticulate's", {
  skip_if_no_backend()
  user <- new.env(parent = globalenv())
  cases <- alist(
    op_multiply(x, label),
    keras$ops$multiply(x, label),
    times_label(x, label)
  )
  user$times_label <- function(x, label) op_multiply(x, label)
  for (case in cases) {
    f <- rlang::new_function(
      alist(x = , label = ),
      rlang::expr(tuple(!!case, function(upstream) upstream)),
      user
    )
    h <- op_custom_gradient(f)
    err <- expect_error(h(1, "a"), class = "customgrad_error_f")
    expect_s3_class(err$parent, "python.builtin.Exception")
    expect_equal(conditionCall(err$parent), case)
    expect_match(
      cli::ansi_strip(conditionMessage(err)),
      paste0("Caused by error in `", rlang::expr_deparse(case[[1]]), "()`"),
      fixed = TRUE
    )
  }
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) op_multiply(upstream, "a"))
  })
  err <- suppressMessages(expect_error(
    op_grad(h)(op_convert_to_tensor(1, "float32")),
    class = "customgrad_error_grad"
  ))
  expect_equal(conditionCall(err$parent), quote(op_multiply(upstream, "a")))
})
