# Memory: what a dropped function releases, and the peak of long loops.

test_that("a dropped custom-gradient function releases what f captured", {
  skip_if_no_backend()
  made <- captured_function_factory()
  x <- op_convert_to_tensor(c(1, 2))
  expect_values(as.array(made$h(x)), c(2, 4))
  expect_equal(as.vector(native_grad(made$h, c(1, 2))), c(2, 2))
  expect_equal(
    as.vector(as.array(op_grad(\(v) op_sum(made$h(v)))(x))),
    c(2, 2)
  )
  refs <- made$refs
  expect_captured_released(refs, FALSE)
  rm(made)
  expect_captured_released(refs, TRUE)
})

test_that("an untraced function's last grad goes at the next call that runs R", {
  skip_if_no_backend()
  made <- captured_function_factory(trace = FALSE)
  expect_equal(as.vector(native_grad(made$h, c(1, 2))), c(2, 2))
  refs <- made$refs
  rm(made)
  gc() # R's references to the call's tensors go: Python drops the last grad
  # and R learns it at its next forward
  other <- op_custom_gradient(
    \(x) tuple(x + 1, \(upstream) upstream),
    trace = FALSE
  )
  expect_values(as.array(other(1)), 2)
  expect_captured_released(refs, TRUE)
})

test_that("R-run grads do not pile up over op_grad() calls, and go with the function", {
  skip_if_no_backend()
  refs <- list()
  # R runs f at every call (trace = FALSE); each call's grad holds 800 kB.
  f <- op_custom_gradient(
    function(x) {
      big <- new.env()
      big$values <- seq_len(1e5) / 2
      refs[[length(refs) + 1L]] <<- rlang::new_weakref(big)
      tuple(x * 2, function(upstream) upstream * 2 + 0 * big$values[[1]])
    },
    trace = FALSE
  )
  registered <- function() utils::numhash(the$grads)
  x <- op_convert_to_tensor(c(1, 2))
  grad_of <- function(result) if (is.list(result)) result$grad else result
  for (transform in list(op_grad, op_value_and_grad)) {
    g <- transform(function(x) op_sum(f(x)))
    for (i in 1:2) {
      expect_tensor(grad_of(g(x)), c(2, 2)) # traced and compiled by now
    }
    gc()
    expect_tensor(grad_of(g(x)), c(2, 2))
    before <- registered()
    for (i in 1:15) {
      expect_tensor(grad_of(g(x)), c(2, 2))
      if (config_backend() == "jax") {
        expect_null(utils::gethash(the$grads, the$grad_handle))
      }
    }
    # A call's own grad goes as the call returns (JAX; TensorFlow's
    # compiled replay runs R when it traces only), or once R's collector
    # drops the tensors that hold it (PyTorch).
    gc()
    expect_tensor(grad_of(g(x)), c(2, 2))
    expect_lte(registered(), before)
  }
  rm(f, g)
  gc()
  other <- op_custom_gradient(\(x) tuple(x + 1, \(up) up), trace = FALSE)
  expect_values(as.array(other(1)), 2) # R learns of dropped grads here
  gc()
  kept <- sum(vapply(refs, \(ref) !is.null(rlang::wref_key(ref)), NA))
  if (config_backend() == "tensorflow") {
    # TensorFlow's gradient registry keeps each tf.function trace's
    # grad_fn, graph and all, for good: one per trace, not per call.
    expect_lte(kept, 4)
  } else {
    expect_identical(kept, 0L)
  }
})

test_that("dropped op_grad() and op_compile() functions release what f captured", {
  skip_if_no_backend()
  make <- function(transform) {
    big <- new.env()
    big$values <- runif(1e5)
    f <- function(x) op_sum(x * x) + 0 * big$values[[1]]
    g <- transform(f)
    list(g = g, ref = rlang::new_weakref(big))
  }
  made <- make(op_grad)
  expect_equal(
    as.vector(as.array(made$g(op_convert_to_tensor(c(1, 3))))),
    c(2, 6)
  )
  ref <- made$ref
  rm(made)
  gc()
  expect_null(rlang::wref_key(ref))

  made <- make(op_compile)
  expect_equal(as.vector(as.array(made$g(op_convert_to_tensor(c(1, 3))))), 10)
  ref <- made$ref
  rm(made)
  gc()
  expect_null(rlang::wref_key(ref))
})

test_that("a copy handed to Python keeps f alive until Python drops it", {
  skip_if_no_backend()
  made <- captured_function_factory()
  held <- reticulate::r_to_py(made$h)
  refs <- made$refs
  rm(made)
  expect_captured_released(refs, FALSE)
  x <- op_convert_to_tensor(c(1, 2, 3)) # a new signature: R traces f again
  expect_values(as.array(reticulate::py_call(held, x)), c(2, 4, 6))
  rm(held)
  expect_captured_released(refs, TRUE)
})

test_that("a dropped layer releases what its function captured", {
  skip_if_no_backend()
  made <- captured_function_factory()
  layer <- layer_custom_gradient(f = made$h)
  expect_values(
    as.array(layer(op_convert_to_tensor(matrix(c(1, 2), 1)))),
    c(2, 4)
  )
  refs <- made$refs
  rm(made)
  expect_captured_released(refs, FALSE)
  rm(layer)
  gc()
  reticulate::import("gc")$collect() # Keras layers hold cycles of their own
  expect_captured_released(refs, TRUE)
})

test_that("without Linux's probes, with or without a device count, a loop collects every 2 MB handed to R or counted on the device", {
  skip_if_no_backend()
  for (device in c(FALSE, TRUE)) {
    made <- fake_device_loop(device)$collections
    # A collection is due every 5 steps or so (2 MB handed to R, or counted
    # on the device; TensorFlow hands R more tensors a step): about 30,
    # neither none nor one a step. What each frees depends on R's collector:
    # make soak (tests/soak/test-memory-bounds.R) bounds the peak.
    expect_gte(made, 20) # 24 to 27 seen
    expect_lte(made, 75) # 43 on TensorFlow without a device count
  }
})

test_that("calls that R runs make no R symbols, which R keeps for good", {
  skip_if_no_backend()
  # Each forward that runs R registers its grad under a new handle; kept by
  # name in an environment, each handle was a new symbol (3 R objects a call,
  # never freed).
  h <- op_custom_gradient(
    \(x) tuple(x * 2, \(upstream) upstream * 2),
    trace = FALSE
  )
  x <- op_convert_to_tensor(c(1, 2), "float32")
  g <- op_grad(\(x) op_sum(h(x)))
  for (i in 1:20) {
    h(x)
    g(x)
  }
  symbols <- function() memory.profile()[["symbol"]]
  before <- symbols()
  for (i in 1:500) {
    h(x)
    g(x)
  }
  expect_lt(symbols() - before, 20)
})
