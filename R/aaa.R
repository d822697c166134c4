# Package state, every field declared here. Python handles are filled on
# first use (see python.R), so loading the package never starts Python.
the <- new.env(parent = emptyenv())
the$py_module <- NULL # customgrad's Python module, a delayed import (.onLoad)
the$py_ready <- FALSE # Python started and R's callbacks registered
# This session's token: Python handles kept with another (a restored
# workspace) are null pointers. Comparing it is cheaper than asking.
the$session <- new.env(parent = emptyenv())
the$backend <- NULL # Keras' backend when customgrad started using it
the$submodules <- new.env(parent = emptyenv()) # customgrad.<name> modules
the$ops <- new.env(parent = emptyenv()) # cached keras.ops callables
the$np_asarray <- NULL # numpy.asarray, for R arrays as tensors
the$f_result_parts <- NULL # _bridge.f_result_parts (reticulate-internals.R)
# grad callbacks by handle: a hash table (made in .onLoad: one made when
# the package is built would not survive serialization), not an
# environment, whose every new name would be a symbol that R keeps for good.
the$grads <- NULL
the$code_reads <- NULL # what functions' code reads, a hash table (captures.R)
the$grad_handle <- 0 # the last handle given to a grad callback
the$collection_deferred <- FALSE # R collects before its next call (python.R)
the$tracing <- 0L # depth of f or grad running on symbolic tensors (trace.R)
the$ready_made <- new.env(parent = emptyenv()) # ready-made ops by parameters
# Set once a JAX run of several processes is joined: its finalizer leaves the
# run at R's exit (distributed.R).
the$leaves_run <- NULL
