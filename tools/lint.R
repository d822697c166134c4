# `make lint`: lintr::lint_package() with the settings in .lintr (which say
# what is checked and why); fails on any lint.
# Usage: Rscript tools/lint.R
lints <- lintr::lint_package()
if (length(lints) > 0) {
  print(lints)
  cat(sprintf("\n%d lints: see above.\n", length(lints)))
  quit(status = 1)
}
cat("lintr: no lints.\n")
