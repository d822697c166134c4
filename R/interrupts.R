# R's own shared library, where Python looks for R's interrupt flags when
# the process exports no table of symbols holding them (_interrupts.py,
# which holds interrupts while a backend runs R): R.dll on Windows, where
# that table does not exist; libR.so or libR.dylib where R is built as a
# shared library, which a program embedding R may have loaded privately.
# Where R's executable holds its symbols itself (R built without a shared
# library), there is none, and the process's table has them.
r_library_paths <- function(os = .Platform$OS.type) {
  if (identical(os, "windows")) {
    return(file.path(R.home("bin"), "R.dll"))
  }
  paths <- file.path(R.home("lib"), c("libR.so", "libR.dylib"))
  paths[file.exists(paths)]
}
