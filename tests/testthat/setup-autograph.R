# TensorFlow deletes the files its autograph writes to the temporary
# directory when Python exits, which Python embedded in R doesn't: the
# files these tests make are removed when they end (R CMD check reports
# leftovers in its temporary directory, which Python shares with R).
autograph_files <- function() {
  Sys.glob(file.path(dirname(tempdir()), "__autograph_generated_file*"))
}
autograph_before <- autograph_files()
withr::defer(
  unlink(setdiff(autograph_files(), autograph_before)),
  teardown_env()
)
