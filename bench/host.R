# One R host op loop of `make bench` (bench/run.R), alone in this process
# and timed whole: STEPS calls of the value and gradient of sum(op(x)) on N
# float32 elements, op an R function of R values (exp(), or besselK(x, 1.5))
# with its gradient in R, through op_value_and_grad() ("eager": R at every
# call) or op_compile(op_value_and_grad()) ("compiled": R in host
# callbacks); or `fit EPOCHS [bessel|net] [eager]`, the one-weight model
# through besselK() (or a small network with it on top), with Keras'
# default compilation (or `run_eagerly = TRUE`). bench/host_reference.py is the same in Python with
# NumPy and SciPy. With `direct`, the floor of the issue "customgrad's own
# cost per call": the user's own f and grad called directly from R, with
# the same keras3 calls in them (f, the sum of its value, grad of ones),
# what that R code costs whatever runs it (MODE is ignored). Prints what
# reference.py's report() prints.
# Usage: KERAS_BACKEND=jax Rscript bench/host.R KERNEL MODE N STEPS [direct]
#        | fit EPOCHS [bessel|net] [eager]
args <- commandArgs(trailingOnly = TRUE)
suppressPackageStartupMessages({
  library(keras3)
  library(customgrad)
})
ref <- reticulate::import_from_path("host_reference", "bench")
source("bench/report.R")

# The kernels: value and derivative, R's own functions.
kernels <- list(
  exp = list(value = exp, slope = exp),
  besselk = list(
    value = function(x) besselK(x, 1.5),
    slope = function(x) -(besselK(x, 0.5) + besselK(x, 2.5)) / 2
  )
)

# The user's f: R reads x's values, computes the kernel and its slope.
# `result(value, grad)` is keras3's tuple(), or for the floor list() (R
# calls grad itself there; tuple() costs nothing measurable beside it).
host_f <- function(kernel, result = tuple) {
  k <- kernels[[kernel]]
  function(x) {
    xv <- as.array(x)
    result(
      op_convert_to_tensor(k$value(xv), op_dtype(x)),
      function(upstream) {
        upstream * op_convert_to_tensor(k$slope(xv), op_dtype(x))
      }
    )
  }
}

host_op <- function(kernel) {
  op_custom_gradient(host_f(kernel), trace = FALSE, value_like = "x")
}

if (args[[1]] == "fit") {
  epochs <- as.integer(args[[2]])
  network <- identical(args[3], "net")
  eager <- identical(args[4], "eager")
  data <- ref$fit_data()
  model <- keras_model_sequential(input_shape = 1)
  if (network) {
    # A small network with the op on top: softplus keeps besselK()'s
    # argument positive.
    model <- model |>
      layer_dense(32, activation = "relu") |>
      layer_dense(32, activation = "relu") |>
      layer_dense(1, activation = "softplus")
  } else {
    model <- model |>
      layer_dense(1, use_bias = FALSE, kernel_initializer = "ones")
  }
  # layer_custom_gradient() onto a Sequential model serves its steps
  # (serve_host_ops()): TensorFlow's compiled fit() reaches R.
  model <- model |> layer_custom_gradient(host_op("besselk"))
  model |>
    compile(
      optimizer = optimizer_adam(if (network) 0.01 else 0.05),
      loss = "mse",
      run_eagerly = eager
    )
  report_fit(model, data, epochs, ref$FIT_SAMPLES, ref$FIT_BATCH)
  quit(save = "no")
}

kernel <- args[[1]]
mode <- args[[2]]
n <- as.numeric(args[[3]])
steps <- as.integer(args[[4]])
# An array of n elements, shape (n), as the NumPy reference has (an R
# number would be a tensor of shape ()).
x <- op_convert_to_tensor(array(seq(0.5, 2, length.out = n), n), "float32")
if (identical(args[5], "direct")) {
  f <- host_f(kernel, list)
  ones <- op_ones_like(x)
  step <- function() {
    result <- f(x)
    list(op_sum(result[[1]]), result[[2]](ones))
  }
  time_steps(step, steps)
  quit(save = "no")
}
op <- host_op(kernel)
step <- op_value_and_grad(function(x) op_sum(op(x)))
if (mode == "compiled") {
  step <- op_compile(step)
}
time_steps(function() step(x), steps)
