# Nested R lists of tensors: walk, flatten and rebuild them.
is_nest <- function(x) is.list(x) && !inherits(x, "python.builtin.object")

map_leaves <- function(x, f) if (is_nest(x)) lapply(x, map_leaves, f) else f(x)

leaves_of <- function(x) {
  if (is_nest(x)) do.call(c, lapply(unname(x), leaves_of)) else list(x)
}

rebuild <- function(template, leaves) {
  i <- 0
  walk <- function(t) {
    if (is_nest(t)) {
      return(lapply(t, walk))
    }
    i <<- i + 1
    leaves[[i]]
  }
  walk(template)
}

# A tensor (or None) as an R vector/array; None (no gradient) as zeros.
as_values <- function(t, like) {
  if (is.null(t) || inherits(t, "python.builtin.NoneType")) {
    return(array(0, dim = dim(as.array(like))))
  }
  as.array(t)
}

# Gradients of the scalar `loss(...)` with respect to each argument, by the
# backend's own autodiff (tape / jax.grad / backward), as R arrays nested
# like the arguments. Arguments are R numbers, arrays or nested lists.
native_grads <- function(loss, ...) {
  args <- list(...)
  switch(
    config_backend(),
    tensorflow = {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      targs <- map_leaves(args, function(a) tf$constant(a, dtype = "float32"))
      leaves <- leaves_of(targs)
      tape <- tf$GradientTape()
      y <- local({
        local_tape(tape)
        for (leaf in leaves) {
          tape$watch(leaf)
        }
        do.call(loss, targs)
      })
      grads <- reticulate::py_to_r(tape$gradient(y, leaves))
      rebuild(args, Map(as_values, grads, leaves))
    },
    jax = {
      jax <- reticulate::import("jax")
      targs <- map_leaves(args, op_convert_to_tensor)
      g <- jax$grad(
        function(...) do.call(loss, list(...)),
        argnums = as.list(seq_along(args) - 1L)
      )
      grads <- do.call(g, targs)
      map_leaves(grads, as.array)
    },
    torch = {
      torch <- reticulate::import("torch", convert = FALSE)
      targs <- map_leaves(args, function(a) {
        torch$tensor(a, dtype = torch$float32, requires_grad = TRUE)
      })
      do.call(loss, targs)$backward()
      map_leaves(targs, function(t) as_values(t$grad, t))
    }
  )
}

# Compare values ignoring array dims where `expected` has none.
expect_values <- function(object, expected, tolerance = 1e-5) {
  testthat::expect_equal(
    as.vector(object),
    as.vector(expected),
    tolerance = tolerance
  )
}

# Run `expr` (a call into Python that ends in customgrad code) the way
# customgrad's own functions do, so that classed errors come back classed.
customgrad_call <- function(expr) customgrad:::with_python_errors(expr)

tf_module <- function() reticulate::import("tensorflow", convert = FALSE)
