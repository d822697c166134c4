# Every vignette renders on JAX, each in a fresh R process. R CMD check
# renders them on TensorFlow (`make check`); this file runs only on jax
# (tools/test-backend.R), and test-vignettes-torch.R does the same on PyTorch.

test_that("every vignette renders on jax", {
  skip_unless_backend("jax")
  skip_if_no_callr()
  skip_if_not_installed("rmarkdown")
  skip_if_not(rmarkdown::pandoc_available(), "pandoc is not installed.")
  for (rmd in source_vignettes()) {
    expect_vignette_renders(rmd)
  }
})
