# Pointers to customgrad's documentation from messages. A package installed
# from a checkout (`R CMD INSTALL .`, `remotes::install_local()`) has no
# built vignettes, and vignette() would say "not found": then the pointer
# names the help page, and the article's page on the documentation site.

# One `i` line for a message: where `section` of `vignette` is explained.
# `topic`: the help page that covers the same ground.
docs_hint <- function(vignette, section, topic) {
  if (vignette_installed(vignette)) {
    sprintf(
      "See {.code vignette(\"%s\", package = \"customgrad\")}, section \"%s\".",
      vignette,
      section
    )
  } else {
    sprintf(
      "See {.code ?%s}, or \"%s\" in {.file articles/%s.html} of customgrad's documentation site (this installation has no built vignettes).",
      topic,
      section,
      vignette
    )
  }
}

vignette_installed <- function(name) {
  info <- tools::getVignetteInfo("customgrad")
  name %in% info[, "Topic"]
}
