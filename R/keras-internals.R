# The Python class names of Keras objects that R code relies on, in one
# place (the Python package's own reliance on Keras internals is in
# inst/python/customgrad/_keras_internals.py). They name modules under
# `keras.src`, which Keras may move in any release; test-keras-internals.R
# checks each against the installed Keras.

# Keras symbolic tensors, which f and grad get while traced (trace.R).
keras_tensor_class <- "keras.src.backend.common.keras_tensor.KerasTensor"

# Keras variables of the JAX and PyTorch backends get the very same Ops and
# Math methods as tensors (and nothing else: they keep reticulate's
# printing). On R < 4.3, an operator whose two operands find different
# methods warns "Incompatible methods" and falls back to R's internal one
# unless the two methods are identical(): `w * tracer` in a constraint needs
# one method for both. TensorFlow variables are "tensorflow.tensor" first
# and find tensorflow R's methods, as TensorFlow tensors do.
keras_variable_classes <- c(
  jax = "keras.src.backend.jax.core.JaxVariable",
  torch = "keras.src.backend.torch.core.Variable"
)

# Keras variables on every backend (their common base class), which
# op_gradient_reversal() and its layer take for `lambda`.
keras_variable_class <- "keras.src.backend.common.variables.Variable"

# A Sequential model, which layer_custom_gradient() adds its layer to.
keras_sequential_class <- "keras.src.models.sequential.Sequential"

# Every Keras model (Sequential, functional, subclassed), which
# serve_host_ops() takes.
keras_model_class <- "keras.src.models.model.Model"
