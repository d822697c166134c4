test_that("the vignettes are installed with the package", {
  # `make` installs from a tarball with the vignettes built, as R CMD check
  # does, and as the README tells users to: vignette("training") works.
  info <- tools::getVignetteInfo("customgrad")
  expect_setequal(
    info[, "Topic"],
    c(
      "backends-and-speed",
      "custom-gradients",
      "from-zero",
      "gradients",
      "r-functions",
      "techniques",
      "training",
      "troubleshooting"
    )
  )
})

test_that("a pointer to a vignette runs as printed where vignettes were built", {
  local_vignettes_installed(TRUE)
  hint <- customgrad:::docs_hint(
    "troubleshooting",
    "A model that won't reload",
    "layer_custom_gradient"
  )
  expect_match(
    hint,
    "vignette(\"troubleshooting\", package = \"customgrad\")",
    fixed = TRUE
  )
  expect_match(hint, "A model that won't reload", fixed = TRUE)
  code <- regmatches(hint, regexpr("vignette\\([^)]*\\)", hint))
  expect_s3_class(eval(parse(text = code)), "vignette")
})

test_that("without built vignettes, a pointer names the help page and the site's article", {
  local_vignettes_installed(FALSE)
  hint <- customgrad:::docs_hint(
    "troubleshooting",
    "A model that won't reload",
    "layer_custom_gradient"
  )
  expect_false(grepl("vignette(", hint, fixed = TRUE))
  expect_match(hint, "?layer_custom_gradient", fixed = TRUE)
  expect_match(hint, "articles/troubleshooting.html", fixed = TRUE)
  expect_true(nzchar(system.file("help", "AnIndex", package = "customgrad")))
  topics <- readLines(system.file("help", "AnIndex", package = "customgrad"))
  expect_true(any(startsWith(topics, "layer_custom_gradient\t")))
})
