# `make check`: build the tarball and run R CMD check --as-cran offline.
# Fails on any ERROR or WARNING, and on any NOTE that does not match one of
# the patterns given as arguments (the Makefile lists them with reasons).
allowed <- commandArgs(trailingOnly = TRUE)
dir.create("check", showWarnings = FALSE)
env <- c(
  "_R_CHECK_CRAN_INCOMING_=false",
  "_R_CHECK_CRAN_INCOMING_REMOTE_=false",
  "_R_CHECK_SYSTEM_CLOCK_=false",
  "_R_CHECK_FORCE_SUGGESTS_=true"
)
run <- function(args, wd = ".") {
  old <- setwd(wd)
  on.exit(setwd(old))
  status <- system2(file.path(R.home("bin"), "R"), args, env = env)
  if (status != 0) {
    stop("R ", paste(args, collapse = " "), " failed (status ", status, ")")
  }
}
run(c("CMD", "build", "."))
desc <- read.dcf("DESCRIPTION", fields = c("Package", "Version"))
tarball <- sprintf("%s_%s.tar.gz", desc[, "Package"], desc[, "Version"])
file.rename(tarball, file.path("check", tarball))
status <- tryCatch(
  {
    # --no-manual: the PDF manual needs LaTeX, which this project does not
    # install (hundreds of MB); the Rd files are still checked.
    run(c("CMD", "check", "--as-cran", "--no-manual", tarball), wd = "check")
    0
  },
  error = function(e) 1
)
log <- readLines(file.path("check", "customgrad.Rcheck", "00check.log"))
problems <- grep(
  "\\.\\.\\. (ERROR|WARNING|NOTE)$|^\\* .*\\.\\.\\.\\s*$",
  log,
  value = TRUE
)
errors <- grep("(ERROR|WARNING)$", log, value = TRUE)
notes <- grep("NOTE$", log, value = TRUE)
unexplained <- notes[
  !vapply(notes, function(n) any(vapply(allowed, grepl, TRUE, x = n)), TRUE)
]
if (length(errors) || length(unexplained) || status != 0) {
  cat(
    "\nR CMD check problems:\n",
    paste0("  ", c(errors, unexplained), "\n"),
    sep = ""
  )
  quit(status = 1)
}
cat(
  "\nR CMD check: clean",
  if (length(notes)) sprintf("(%d accepted NOTE(s))", length(notes)),
  "\n"
)
