# Helpers for test-python.R.

# In a new R process with the environment variables `...` (and `unset`
# removed), attach customgrad and make the first custom-gradient call: what
# it raised, and which Python (if any) started. `output` collects the
# process's printed output.
first_call_in_fresh_r <- function(..., unset = character(), output = NULL) {
  callr::r(
    function(unset) {
      Sys.unsetenv(unset)
      library(customgrad)
      h <- op_custom_gradient(function(x) list(x, function(upstream) upstream))
      err <- tryCatch(h(0), error = function(e) e)
      started <- reticulate::py_available(initialize = FALSE)
      list(
        class = class(err),
        message = conditionMessage(err),
        started = started,
        python = if (started) reticulate::py_config()$python
      )
    },
    args = list(unset = unset),
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), ...),
    stdout = output,
    stderr = output
  )
}
