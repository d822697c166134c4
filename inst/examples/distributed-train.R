# One process of a data-parallel run with custom gradients (JAX backend).
#
# Every process runs this same script; the launcher tells each its part
# through Keras' own environment variables, which use_distributed() reads:
#   KERAS_DISTRIBUTION_NUM_PROCESSES  how many processes take part
#   KERAS_DISTRIBUTION_PROCESS_ID     this one's number, 0 to N - 1
#   KERAS_DISTRIBUTION_JOB_ADDRESSES  host:port of process 0
# With none set, it is the one process of a run and trains on every row.
#
# Usage: KERAS_BACKEND=jax Rscript distributed-train.R [steps] [weights.rds]
# Each step trains on a global batch of 32 rows, split evenly among the
# processes; the final weights are printed and, if a file is named, saved.

library(keras3)
use_backend("jax")
library(customgrad)

settings <- use_distributed()
processes <- settings$num_processes
id <- settings$process_id
args <- commandArgs(trailingOnly = TRUE)
steps <- if (length(args) >= 1) as.integer(args[[1]]) else 20L
out <- if (length(args) >= 2) args[[2]] else NULL

if (processes > 1) {
  # Each process feeds its own rows; Keras joins them into the global batch.
  keras$distribution$set_distribution(
    keras$distribution$DataParallel(auto_shard_dataset = FALSE)
  )
}

# The same data in every process: a label, and which of two domains a row
# comes from (the second is shifted).
global_batch <- 32L
set.seed(42)
n <- global_batch * steps
domain <- rep(0:1, length.out = n)
x <- matrix(rnorm(n * 4), ncol = 4) + domain
y <- sin(x[, 1]) + x[, 2] / 2

# This process's rows: its slice of every global batch, in order.
local_batch <- global_batch %/% processes
in_batch <- (seq_len(n) - 1L) %% global_batch
rows <- which(in_batch %/% local_batch == id)

log1pexp <- op_custom_gradient(\(x) {
  grad <- function(upstream) upstream / (1 + op_exp(-x))
  tuple(op_relu(x) + op_log1p(op_exp(-op_abs(x))), grad)
})

set_random_seed(1)
inputs <- keras_input(4)
features <- inputs |> layer_dense(16) |> layer_custom_gradient(log1pexp)
label <- features |> layer_dense(1, name = "label")
domain_guess <- features |>
  layer_gradient_reversal(lambda = 0.3) |>
  layer_dense(1, activation = "sigmoid", name = "domain")
model <- keras_model(inputs, list(label = label, domain = domain_guess))
model |>
  compile(
    optimizer = optimizer_sgd(0.05),
    loss = list(label = "mse", domain = "binary_crossentropy")
  )
history <- model |>
  fit(
    x[rows, , drop = FALSE],
    list(label = y[rows], domain = domain[rows]),
    batch_size = local_batch,
    epochs = 1,
    shuffle = FALSE,
    verbose = 0
  )

weights <- unlist(lapply(model$get_weights(), as.numeric))
cat(sprintf(
  "process %d of %d: loss %.6f; weights %s ...\n",
  id,
  processes,
  history$metrics$loss[[1]],
  paste(format(weights[1:4], digits = 7), collapse = " ")
))
if (!is.null(out)) {
  saveRDS(weights, out)
}
