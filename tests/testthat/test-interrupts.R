# Where Python finds R's interrupt flags (interrupts.R).

test_that("R's library is R.dll on Windows, and the libR that exists elsewhere", {
  expect_identical(
    customgrad:::r_library_paths("windows"),
    file.path(R.home("bin"), "R.dll")
  )
  unix <- customgrad:::r_library_paths("unix")
  expect_true(all(file.exists(unix)))
  expect_true(all(basename(unix) %in% c("libR.so", "libR.dylib")))
  # Debian's R is built as a shared library.
  if (file.exists(file.path(R.home("lib"), "libR.so"))) {
    expect_identical(unix, file.path(R.home("lib"), "libR.so"))
  }
})

test_that("Python finds R's interrupt flags in this R process", {
  skip_if_no_backend()
  customgrad:::customgrad_py()
  interrupts <- reticulate::import("customgrad._interrupts", convert = TRUE)
  flags <- interrupts$`_r_flags`()
  expect_false(is.null(flags))
  # The flag R's own suspendInterrupts() sets, seen from Python.
  expect_identical(suspendInterrupts(flags[[1]]$value), 1L)
  expect_identical(flags[[1]]$value, 0L)
})
