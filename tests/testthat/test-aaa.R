# The package state: every field declared in aaa.R, Python handles empty
# until first use, and no field added by code elsewhere.

test_that("the package state is declared up front and nothing adds to it", {
  skip_if_no_backend()
  skip_if_no_callr()
  fresh <- callr::r(
    function() {
      the <- get("the", envir = asNamespace("customgrad"))
      list(
        fields = ls(the, all.names = TRUE),
        py_ready = the$py_ready,
        python = reticulate::py_available(initialize = FALSE)
      )
    },
    libpath = .libPaths()
  )
  expect_setequal(
    fresh$fields,
    c(
      "backend",
      "collection_deferred",
      "grad_handle",
      "grads",
      "np_asarray",
      "ops",
      "py_module",
      "py_ready",
      "ready_made",
      "session",
      "submodules",
      "tracing"
    )
  )
  expect_false(fresh$py_ready)
  expect_false(fresh$python)
  # Here, after custom gradients, gradients and checks have run:
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) upstream * 2)
  })
  op_grad(h)(1)
  gradcheck(h, x = 1)
  expect_setequal(ls(customgrad:::the, all.names = TRUE), fresh$fields)
  expect_true(customgrad:::the$py_ready)
})
