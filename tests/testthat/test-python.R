# Python's memory on this backend: tensors handed to R are collected.

test_that("tensors handed to R are collected once their bytes pass the threshold", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    list(x * 2, function(upstream) upstream * 2)
  })
  h(0)
  memory <- bytes_only_collections()
  collected <- 0
  memory$set_collector(
    customgrad:::r_callback(function() {
      collected <<- collected + 1
      customgrad:::collect_garbage()
    }),
    4000
  )
  x <- op_convert_to_tensor(rep(1, 1000), dtype = "float32") # 4,000 bytes
  y <- h(x)
  y <- h(x) # 8,000 bytes handed to R: a collection is due
  expect_identical(collected, 0)
  y <- h(x) # collects at the start of the call
  expect_identical(collected, 1)
  expect_tensor(y, rep(2, 1000))
})

test_that("a value made as another function's argument goes at the next collection, where the backend runs the rule after the step", {
  skip_if_no_backend()
  source(test_path("eager-loop.R"), local = TRUE)
  h <- op_custom_gradient(function(x) {
    list(x * 2, function(upstream) upstream * 2)
  })
  py <- reticulate::py_run_string(
    "import weakref\nrefs = []\ndef watch(v, refs=refs, ref=weakref.ref):\n    refs.append(ref(v))\n    return v\n",
    local = TRUE,
    convert = FALSE
  )
  alive <- function(i) !is.null(reticulate::py_to_r(py$refs[i - 1L]()))
  # The harness computes h(x) as op_sum()'s argument, through reticulate.
  x <- op_convert_to_tensor(rep(1, 1000), dtype = "float32") # 4,000 bytes
  step <- eager_step(function(x) reticulate::py_call(py$watch, h(x)), x)
  step()
  memory <- growing_memory_collections(4000)
  collections <- function() reticulate::py_to_r(memory$stats())$collections
  released_after_next_collection <- function() {
    memory$set_collector(
      customgrad:::r_callback(customgrad:::collect_garbage),
      6000
    )
    repeat {
      before <- collections()
      step()
      if (collections() > before) break
    }
    kept <- length(py$refs)
    start <- collections()
    while (collections() < start + 1) {
      step()
    }
    !alive(kept)
  }
  # On JAX too: its rule, traced with the forward pass, collects from a
  # callback in the backward pass. At a call's start, inside op_sum()'s
  # argument, R would keep the value until its next level-1 collection.
  expect_true(all(replicate(3, released_after_next_collection())))
  expect_tensor(step(), rep(2, 1000))
})

test_that("op_grad()'s result from a call where a collection fell due goes at the next one", {
  skip_if_no_backend()
  g <- op_grad(function(v) op_sum(v * v))
  x <- op_convert_to_tensor(rep(1, 1000), dtype = "float32") # 4,000 bytes
  g(x)
  memory <- bytes_only_collections()
  collections <- function() reticulate::py_to_r(memory$stats())$collections
  # The result of the call during which a collection runs, and whether
  # R's collector has released it by the next collection.
  released_after <- function(defer) {
    memory$set_collector(
      customgrad:::r_callback(customgrad:::collect_garbage),
      6000,
      defer
    )
    released <- FALSE
    repeat {
      before <- collections()
      y <- g(x)
      if (collections() > before) break
    }
    reg.finalizer(y, function(e) released <<- TRUE)
    rm(y)
    start <- collections()
    while (collections() < start + 1) {
      g(x)
    }
    released
  }
  # Run inside the call, the collection keeps the call's result past the
  # minor collections after it, until R's next level-1 one (one in 21:
  # three tries, lest one of them meets it).
  expect_false(all(replicate(3, released_after(NULL))))
  expect_true(released_after(
    customgrad:::r_callback(customgrad:::defer_collection)
  ))
  expect_tensor(g(x), rep(2, 1000))
})
