# `make demo`: the documentation example of op_custom_gradient() on the
# backend in KERAS_BACKEND, differentiated with that backend's own autodiff.
# The gradient of log(1 + exp(x)) at x = 100 must be exactly 1 (the naive
# formula gives NaN there).
library(customgrad)

log1pexp <- op_custom_gradient(\(x) {
  e <- op_exp(x)
  grad <- function(..., upstream = NULL) {
    upstream <- upstream %||% ..1
    op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
  }
  tuple(op_log(1 + e), grad)
})

# d/dx f(x) at x, with the active backend's own gradient machinery.
native_gradient <- function(f, x) {
  switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      x <- tf$constant(x)
      tape <- tf$GradientTape()
      tape$`__enter__`()
      tape$watch(x)
      y <- f(x)
      tape$`__exit__`(NULL, NULL, NULL)
      tape$gradient(y, x)
    },
    jax = reticulate::import("jax")$grad(f)(x),
    torch = {
      torch <- reticulate::import("torch", convert = FALSE)
      x <- torch$tensor(x, requires_grad = TRUE)
      f(x)$backward()
      x$grad
    }
  )
}

g <- as.numeric(native_gradient(log1pexp, 100))
cat(sprintf("%s: d/dx log1pexp(100) = %s\n", config_backend(), format(g)))
if (!identical(g, 1)) {
  quit(status = 1)
}
