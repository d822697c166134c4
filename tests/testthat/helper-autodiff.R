# Helpers for the op_grad(), gradcheck() and op_compile() tests.

# log(1 + exp(x)) with its stable custom gradient (the package's example).
new_log1pexp <- function() {
  op_custom_gradient(function(x) {
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
}

# sin(x) with a custom gradient: cos(x) when right, sin(x) when wrong.
new_custom_sin <- function(right = TRUE) {
  op_custom_gradient(function(x) {
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      if (right) upstream * cos(x) else upstream * sin(x)
    }
    tuple(sin(x), grad)
  })
}

# An attribute's value in R, whether or not the object converts results.
py_value <- function(x) {
  if (inherits(x, "python.builtin.object")) reticulate::py_to_r(x) else x
}

# How many times Python has called into R so far (customgrad's callbacks).
r_calls_so_far <- function() {
  py_value(customgrad:::customgrad_py("_bridge")$r_calls)[[1]]
}

# A tensor's values as a plain R vector.
grad_values <- function(x) as.vector(as.array(x))

# How the backend computes in float64 right now: JAX's x64 flag (NA
# elsewhere), Keras' promotion of float64 results, and Keras' float type.
float64_state <- function() {
  jax_x64 <- if (config_backend() == "jax") {
    reticulate::py_to_r(
      reticulate::import("jax", convert = FALSE)$config$jax_enable_x64
    )
  } else {
    NA
  }
  internals <- customgrad:::customgrad_py("_keras_internals")
  list(
    jax_x64 = jax_x64,
    promotion = internals$float64_promotion(),
    floatx = op_dtype(op_convert_to_tensor(0.5))
  )
}
