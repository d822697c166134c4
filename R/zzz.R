.onLoad <- function(libname, pkgname) {
  the$grads <- utils::hashtab()
  the$code_reads <- utils::hashtab()
  declare_python_requirements()
  register_python_module()
  register_tensor_methods()
  if (reticulate::py_available(initialize = FALSE)) {
    on_python_start()
  } else {
    setHook("reticulate.onPyInit", on_python_start)
  }
}

# Run when Python starts, whoever starts it (keras3 usually).
on_python_start <- function() {
  reticulate::py_register_load_hook("keras", on_keras_import)
}

# Once Keras is imported (by keras3, the user or load_model()), customgrad's
# layer class is registered with it, so that a saved model's layers are
# found in a fresh session, and R's resolver finds a loaded layer's R
# function. With `options(customgrad.freeze_imports = TRUE)`, what Python
# holds then is frozen out of its cyclic collector (see ?customgrad-package).
# Never fails: without it, only loading saved layers would.
on_keras_import <- function() {
  tryCatch(
    {
      add_python_path()
      layers <- reticulate::import("customgrad.layers", convert = TRUE)
      layers$set_resolver(r_callback(resolve_layer_function))
      if (isTRUE(getOption("customgrad.freeze_imports"))) {
        layers$freeze_imported()
      }
    },
    error = function(cnd) invisible(FALSE)
  )
}

# customgrad's methods for JAX and torch tensors (see tensor-ops.R). A
# generic that already has a method for a class (from keras3, tensorflow or
# reticulate's own per-class methods) keeps it: nothing is overwritten.
# keras3 adds as.array(), t(), `^` and %*% for the backend's tensor class
# when Keras starts; tensor_methods() has none of those.
register_tensor_methods <- function() {
  methods <- tensor_methods()
  for (class in tensor_classes) {
    for (generic in names(methods)) {
      register_if_missing(generic, class, methods[[generic]])
    }
  }
  # Keras variables: the same method objects as tensors, so that a variable
  # and a tensor find identical methods (see keras_variable_classes).
  for (class in keras_variable_classes) {
    register_if_missing("Ops", class, methods$Ops)
    register_if_missing("Math", class, methods$Math)
  }
  # Keras symbolic tensors, which f and grad get while traced (trace.R).
  kt_methods <- keras_tensor_methods()
  for (generic in names(kt_methods)) {
    register_if_missing(generic, keras_tensor_class, kt_methods[[generic]])
  }
  # tensorflow R has Math methods one by one (sin(), exp(), ...) but none
  # for tanh(), cosh(), trunc(), cumsum() and the like: the Math group
  # method fills only those gaps.
  register_if_missing("Math", "tensorflow.tensor", tensor_Math)
  # reticulate's summary() of a TensorFlow tensor prints str() and returns
  # NULL; this one is the same as for JAX and torch tensors.
  register_if_missing("summary", "tensorflow.tensor", tensor_summary)
}

register_if_missing <- function(generic, class, method) {
  envir <- if (generic == "str") asNamespace("utils") else baseenv()
  existing <- utils::getS3method(generic, class, optional = TRUE, envir = envir)
  if (is.null(existing)) {
    registerS3method(generic, class, method, envir = envir)
  }
}
