# Runs R files in order in the global environment of this R process, as if
# typed at the console (values print), for the documentation tests
# (helper-docs.R). Stops at the first file that raises an error or a
# warning, and writes which file and the condition to FAILURE_FILE.
# Usage: Rscript run-chunks.R FAILURE_FILE FILE...
local({
  args <- commandArgs(trailingOnly = TRUE)
  failure_file <- args[[1]]
  describe <- function(cnd) {
    call <- conditionCall(cnd)
    c(
      paste(class(cnd), collapse = "/"),
      if (!is.null(call)) paste("in", deparse(call, nlines = 1L)),
      conditionMessage(cnd)
    )
  }
  for (file in args[-1]) {
    cat("\n#### ", file, "\n", sep = "")
    problem <- NULL
    withCallingHandlers(
      tryCatch(
        source(
          file,
          local = globalenv(),
          keep.source = TRUE,
          echo = TRUE,
          max.deparse.length = Inf,
          spaced = FALSE
        ),
        error = function(e) problem <<- e
      ),
      warning = function(w) {
        if (is.null(problem)) {
          problem <<- w
        }
        invokeRestart("muffleWarning")
      }
    )
    if (!is.null(problem)) {
      writeLines(c(file, describe(problem)), failure_file)
      quit(save = "no", status = 1)
    }
  }
})
