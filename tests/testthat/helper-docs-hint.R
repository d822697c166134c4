# Whether customgrad's vignettes count as installed, for the length of the
# calling test: messages point to a vignette or to a help page by it
# (R/docs.R). testthat 3.1.6 (Debian's) has no local_mocked_bindings().
local_vignettes_installed <- function(
  installed,
  .local_envir = parent.frame()
) {
  ns <- asNamespace("customgrad")
  original <- get("vignette_installed", envir = ns)
  unlockBinding("vignette_installed", ns)
  assign("vignette_installed", function(name) installed, envir = ns)
  withr::defer(
    {
      assign("vignette_installed", original, envir = ns)
      lockBinding("vignette_installed", ns)
    },
    envir = .local_envir
  )
}
