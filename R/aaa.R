# Package state. Python handles are filled lazily (see python.R), so loading
# the package never starts Python.
the <- new.env(parent = emptyenv())
the$ops <- new.env(parent = emptyenv()) # cached keras.ops callables
the$errors <- new.env(parent = emptyenv()) # R conditions raised in callbacks
the$error_count <- 0L
