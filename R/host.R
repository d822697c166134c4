# R's own numerics inside compiled computations: where R runs a
# custom-gradient function in the backend's host callback, Python asks R
# for the shapes and dtypes of its value before R runs it.

# Called from Python with f's inputs as symbolic tensors, where R runs f in
# a host callback (inst/python/customgrad/_host.py): tensors shaped like
# f's value, from op_custom_gradient()'s `value_like`.
host_value_like <- function(state, ...) {
  inputs <- passed_inputs(restore_statics(list(...), state$statics), state)
  like <- state$value_like
  if (is.function(like)) {
    return(do.call(like, unname(inputs)))
  }
  value <- inputs[[like]]
  if (is.null(value)) {
    abort_customgrad(
      c(
        "{.arg value_like} names the argument {.arg {like}}, which this call did not pass.",
        "i" = "Pass it, or give {.arg value_like} as a function of the inputs that returns a tensor shaped like the value."
      ),
      class = "value_like",
      call = NULL
    )
  }
  value
}
