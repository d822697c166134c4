# `make check`: R CMD check --as-cran offline, through rcmdcheck (Debian's
# r-cran-rcmdcheck), which builds the tarball, runs the check and parses its
# verdict. Fails on any ERROR or WARNING, and on any NOTE that matches none
# of the patterns given as arguments (the Makefile lists them with reasons).
allowed <- commandArgs(trailingOnly = TRUE)
result <- rcmdcheck::rcmdcheck(
  ".",
  # --no-manual: the PDF manual needs LaTeX, which this project does not
  # install (hundreds of MB); the Rd files are still checked.
  args = c("--as-cran", "--no-manual"),
  check_dir = "check",
  error_on = "never",
  env = c(
    "_R_CHECK_CRAN_INCOMING_" = "false",
    "_R_CHECK_CRAN_INCOMING_REMOTE_" = "false",
    "_R_CHECK_SYSTEM_CLOCK_" = "false",
    "_R_CHECK_FORCE_SUGGESTS_" = "true"
  )
)
accepted <- vapply(
  result$notes,
  function(note) any(vapply(allowed, grepl, TRUE, x = note)),
  TRUE
)
problems <- c(result$errors, result$warnings, result$notes[!accepted])
if (length(problems) > 0) {
  cat("\nR CMD check problems:\n", paste0(problems, "\n"), sep = "")
  quit(status = 1)
}
cat(
  "\nR CMD check: clean",
  if (any(accepted)) sprintf("(%d accepted NOTE(s))", sum(accepted)),
  "\n"
)
