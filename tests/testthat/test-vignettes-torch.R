# Every vignette renders on PyTorch, each in a fresh R process. R CMD check
# renders them on TensorFlow (`make check`); this file runs only on torch
# (tools/test-backend.R), and test-vignettes-jax.R does the same on JAX.

test_that("every vignette renders on torch", {
  skip_unless_backend("torch")
  skip_if_no_callr()
  skip_if_not_installed("rmarkdown")
  skip_if_not(rmarkdown::pandoc_available(), "pandoc is not installed.")
  for (rmd in source_vignettes()) {
    expect_vignette_renders(rmd)
  }
})
