.onLoad <- function(libname, pkgname) {
  # Prefer customgrad's own environment; RETICULATE_PYTHON still wins, and
  # required = FALSE leaves the choice open until Python starts.
  env <- python_env_path()
  if (
    !nzchar(Sys.getenv("RETICULATE_PYTHON")) &&
      file.exists(python_env_python(env))
  ) {
    reticulate::use_virtualenv(env, required = FALSE)
  }
  the$py_call_impl <- find_py_call_impl()
  register_tensor_methods()
  register_deferred_methods()
}

# The same method object for every tensor class (see tensor-ops.R), so that
# `x + y` with tensors of two classes dispatches without a warning.
register_tensor_methods <- function() {
  methods <- c(tensor_compute_methods(), tensor_value_methods())
  base <- asNamespace("base")
  for (class in tensor_classes) {
    for (generic in names(methods)) {
      registerS3method(generic, class, methods[[generic]], envir = base)
    }
  }
}
