# Package state. Python handles are filled lazily (see python.R), so loading
# the package never starts Python.
the <- new.env(parent = emptyenv())
the$ops <- new.env(parent = emptyenv()) # cached keras.ops callables
the$submodules <- new.env(parent = emptyenv()) # customgrad.<name> modules
the$grads <- new.env(parent = emptyenv()) # grad callbacks by handle
the$grad_handle <- 0
the$tracing <- 0L # depth of f or grad running on symbolic tensors (trace.R)
