# Installs the R packages of the keras3 stack that customgrad builds on
# (reticulate >= 1.42, tensorflow, keras3 >= 1.5) where the installed ones
# are missing or too old. Debian's reticulate is 1.28, so they come from the
# configured CRAN repository when it answers; otherwise, offline, from the
# directory of source packages named by CUSTOMGRAD_R_SOURCES (default:
# ../shared/compat beside the project). Their other imports come from
# Debian (tools/setup-system.sh). Quick when everything is there.
#
# Usage: Rscript tools/setup-r-packages.R

required <- c(reticulate = "1.42", tensorflow = "2.16", keras3 = "1.5")

installed_ok <- function(pkg, version) {
  have <- tryCatch(utils::packageVersion(pkg), error = function(e) NULL)
  !is.null(have) && have >= version
}

missing <- names(required)[!mapply(installed_ok, names(required), required)]
if (length(missing) == 0) {
  quit(status = 0)
}

# The first library on the path, where these shadow Debian's
# (/usr/lib/R/site-library comes later); R_LIBS_USER if it isn't writable.
lib <- .libPaths()[[1]]
if (file.access(lib, 2) != 0) {
  lib <- path.expand(Sys.getenv("R_LIBS_USER"))
  dir.create(lib, recursive = TRUE, showWarnings = FALSE)
}

cran <- getOption("repos")[["CRAN"]]
if (is.null(cran) || identical(cran, "@CRAN@")) {
  cran <- "https://cloud.r-project.org"
}

# A directory of source tarballs as a local repository, so that
# install.packages() orders the dependencies itself.
local_repo <- function(sources) {
  tarballs <- list.files(sources, pattern = "\\.tar\\.gz$", full.names = TRUE)
  if (length(tarballs) == 0) {
    stop(
      "No source packages (*.tar.gz) in ",
      sources,
      ", and CRAN (",
      cran,
      ") does not answer. Set CUSTOMGRAD_R_SOURCES to a directory of ",
      "source packages holding ",
      paste(missing, collapse = ", "),
      ".",
      call. = FALSE
    )
  }
  repo <- tempfile("customgrad-repo")
  contrib <- file.path(repo, "src", "contrib")
  dir.create(contrib, recursive = TRUE)
  file.copy(tarballs, contrib)
  tools::write_PACKAGES(contrib, type = "source")
  paste0("file://", normalizePath(repo))
}

# CRAN answers where it gives its index of packages, which
# install.packages() then reads from this session's cache.
cran_answers <- withr::with_options(
  list(timeout = 10),
  nrow(suppressWarnings(utils::available.packages(repos = cran))) > 0
)
if (cran_answers) {
  repo <- cran
  message("Installing ", paste(missing, collapse = ", "), " from ", cran)
} else {
  # The default, beside the project, from this script's path.
  script <- grep("^--file=", commandArgs(FALSE), value = TRUE)
  project <- dirname(dirname(normalizePath(sub("^--file=", "", script))))
  default <- file.path(project, "..", "shared", "compat")
  sources <- Sys.getenv("CUSTOMGRAD_R_SOURCES", default)
  message(
    "CRAN (",
    cran,
    ") does not answer: installing ",
    paste(missing, collapse = ", "),
    " from the source packages in ",
    normalizePath(sources, mustWork = FALSE)
  )
  repo <- local_repo(sources)
}

install_ok <- TRUE
withCallingHandlers(
  utils::install.packages(missing, lib = lib, repos = repo, type = "source"),
  warning = function(w) {
    install_ok <<- FALSE
    message("install.packages: ", conditionMessage(w))
  }
)

# Nothing is loaded here, so packageVersion() reads the copy found first on
# the library path: the one R sessions will load.
for (pkg in names(required)) {
  message(sprintf(
    "  %-11s %s  (%s)",
    pkg,
    utils::packageVersion(pkg),
    dirname(find.package(pkg))
  ))
}
still_missing <- names(required)[
  !mapply(installed_ok, names(required), required)
]
if (!install_ok || length(still_missing) > 0) {
  stop(
    "Installing ",
    paste(missing, collapse = ", "),
    " failed (see above)",
    if (length(still_missing)) {
      paste0(
        "; an older ",
        paste(still_missing, collapse = ", "),
        " is found first: remove it or put ",
        lib,
        " first in .libPaths()"
      )
    },
    ".",
    call. = FALSE
  )
}
