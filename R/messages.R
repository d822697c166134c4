# The records R and Python hand each other, by name (inst/python's
# customgrad/_messages.py defines them). R builds two: the reply of its
# forward callback, and, while tracing, the reply that f or grad can't be
# traced. Python's replies are dicts, which R reads by name:
# value_and_grad's `value` and `grad` (gradients.R), gradcheck's `analytic`,
# `numeric` and `shapes` (gradcheck.R).

# R's reply to a forward call: f's value (a nest of tensors) and the handle
# of the callback that runs grad (see register_grad()).
forward_reply <- function(value, grad) {
  list(value = value, grad = grad)
}

# While tracing, R's reply (to the forward or the grad callback) that f or
# grad can't be traced, and why.
trace_failed_reply <- function(reason) {
  list(customgrad_trace_failed = reason)
}
