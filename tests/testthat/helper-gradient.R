# Gradients with each backend's own machinery, the way a user of that
# backend writes them: GradientTape, jax.grad, torch backward.

# d sum(f(x)) / dx, as an R array; `x` an R number or array.
native_grad <- function(f, x, ...) {
  switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      x <- tf$constant(x, dtype = "float32")
      tape <- tf$GradientTape()
      y <- local({
        local_tape(tape)
        tape$watch(x)
        tf$reduce_sum(f(x, ...))
      })
      as.array(tape$gradient(y, x))
    },
    jax = {
      jax <- reticulate::import("jax", convert = FALSE)
      jnp <- reticulate::import("jax.numpy", convert = FALSE)
      loss <- function(x) jnp$sum(f(x, ...))
      as.array(reticulate::py_call(jax$grad(loss), op_convert_to_tensor(x)))
    },
    torch = {
      torch <- reticulate::import("torch", convert = FALSE)
      x <- torch$tensor(x, dtype = torch$float32, requires_grad = TRUE)
      f(x, ...)$sum()$backward()
      as.array(x$grad)
    }
  )
}

# A backend tensor whose values (and shape, when `expected` has dim) match.
expect_tensor <- function(object, expected, tolerance = 1e-6) {
  testthat::expect_true(inherits(object, "python.builtin.object"))
  # as.array() first: tensorflow R's as.vector() method fails on TF tensors.
  actual <- as.array(object)
  if (is.null(dim(expected))) {
    actual <- as.vector(actual)
  }
  testthat::expect_equal(actual, expected, tolerance = tolerance)
}

# Enter the Python context manager `ctx` until `frame` ends, error or not
# (withr-style); returns what `__enter__()` gave.
local_python_context <- function(ctx, frame = parent.frame()) {
  value <- ctx$`__enter__`()
  withr::defer(ctx$`__exit__`(NULL, NULL, NULL), envir = frame)
  invisible(value)
}

# Record on `tape` until `frame` ends: a tape left active would record
# everything the later tests do.
local_tape <- function(tape, frame = parent.frame()) {
  local_python_context(tape, frame)
}
