# The first README's log1pexp (the naive one, which issue 39's benchmark
# measures) in eager gradient steps. Sourced by the memory tests, by
# `make soak` (tools/soak-backend.R) and `make bench` (bench/loop.R), so
# that all measure the loop users write. Needs keras3 and customgrad
# attached.

naive_log1pexp <- function() {
  op_custom_gradient(\(x) {
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
}

# A function of no arguments running one step of the gradient of
# sum(f(x)): through the backend's own gradient, as its users write it
# (route "native"), or through op_grad().
eager_step <- function(f, x, route = c("native", "op_grad")) {
  route <- match.arg(route)
  if (route == "op_grad") {
    g <- op_grad(\(v) op_sum(f(v)))
    return(function() g(x))
  }
  switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow")
      function() {
        with(tf$GradientTape() %as% tape, {
          tape$watch(x)
          s <- op_sum(f(x))
        })
        tape$gradient(s, x)
      }
    },
    jax = {
      g <- reticulate::import("jax")$grad(\(v) op_sum(f(v)))
      function() g(x)$block_until_ready()
    },
    torch = {
      x <- x$detach()$requires_grad_(TRUE)
      function() {
        x$grad <- NULL
        op_sum(f(x))$backward()
        x$grad
      }
    }
  )
}

# This process's resident set ("VmRSS") or its peak ("VmHWM"), in MB.
process_mb <- function(field = "VmRSS") {
  line <- grep(
    paste0("^", field, ":"),
    readLines("/proc/self/status"),
    value = TRUE
  )
  as.numeric(strsplit(line, "\\s+")[[1]][[2]]) / 1024
}
