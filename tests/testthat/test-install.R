test_that("requirements are pinned, with lines chosen by backend", {
  all <- customgrad:::python_requirements(c("tensorflow", "jax", "torch"))
  expect_true(all(grepl("==", all)))
  expect_setequal(
    sub("[=\\[].*$", "", all),
    c("numpy", "keras", "tensorflow-cpu", "jax", "torch")
  )
  expect_true("numpy==1.26.4" %in% all)
  jax_only <- customgrad:::python_requirements("jax")
  expect_setequal(
    jax_only,
    c("numpy==1.26.4", "keras==3.15.1", "jax[cpu]==0.7.1")
  )
})

test_that("install_customgrad() leaves an up-to-date environment alone", {
  env <- withr::local_tempdir()
  reqs <- customgrad:::python_requirements("torch")
  writeLines(reqs, file.path(env, "customgrad-requirements.txt"))
  expect_message(
    out <- install_customgrad(backends = "torch", envname = env),
    "up to date"
  )
  expect_identical(out, env)
})

test_that("install_customgrad() checks its arguments", {
  expect_error(
    install_customgrad(backends = "theano", envname = tempfile()),
    class = "customgrad_error_backend_unknown"
  )
  expect_error(
    customgrad:::check_python_version(tempfile()),
    class = "customgrad_error_python_version"
  )
})

test_that("the vignettes are installed with the package", {
  # `make` installs from a tarball with the vignettes built, as R CMD check
  # does: vignette("custom-gradients") works right after set-up.
  info <- tools::getVignetteInfo("customgrad")
  expect_setequal(
    info[, "Topic"],
    c(
      "backends-and-speed",
      "custom-gradients",
      "from-zero",
      "gradients",
      "techniques",
      "training",
      "troubleshooting"
    )
  )
})
