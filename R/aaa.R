# Package state. Python handles are filled lazily (see python.R), so loading
# the package never starts Python.
the <- new.env(parent = emptyenv())
the$ops <- new.env(parent = emptyenv()) # cached keras.ops callables
the$errors <- new.env(parent = emptyenv()) # R conditions raised in callbacks
the$error_count <- 0L
the$grads <- new.env(parent = emptyenv()) # grad callbacks by handle
the$grad_handle <- 0
the$node_id <- 0 # ids of recorded ops (deferred.R)

# reticulate's internal call entry point if it has one (see py_call_fast());
# looked up in .onLoad, so that it matches the reticulate that is loaded.
find_py_call_impl <- function() {
  impl <- tryCatch(
    utils::getFromNamespace("py_call_impl", "reticulate"),
    error = function(cnd) NULL
  )
  if (
    is.function(impl) &&
      identical(names(formals(impl)), c("x", "args", "keywords"))
  ) {
    return(impl)
  }
  function(fn, args, keywords) {
    do.call(reticulate::py_call, c(list(fn), args, keywords))
  }
}
