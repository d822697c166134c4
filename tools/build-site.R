# `make site`: build customgrad's pkgdown site into docs/ (home page from
# README.md, reference grouped as _pkgdown.yml says, vignettes as articles,
# NEWS), then make it self-contained.
#
# pkgdown 2.0 links its front-end libraries from CDNs (Debian's, MathJax as a
# file:// URL). A site that reaches out works online but shows no search, no
# icons and console errors offline, where CI checks it. So every such link is
# pointed at a copy inside the site, under vendor/:
#  - the libraries at the versions pkgdown pins, installed from the npm
#    registry by `make site` (tools/site/package.json, its lock file); they
#    are byte-identical to the CDNs' files, so the pages keep pkgdown's
#    integrity hashes and the browser verifies every one;
#  - bootstrap-toc, which no registry carries: customgrad's own Toc from
#    the file toc.js in tools/site;
#  - MathJax from Debian's libjs-mathjax (2.7.9; pkgdown pins 2.7.5), with
#    the CommonHTML output instead of pkgdown's HTML-CSS one: HTML-CSS probes
#    fonts with an @font-face at about:blank, which browsers refuse and log
#    as a console error on every page with a formula.
#
# Usage: Rscript tools/build-site.R [node_modules] [mathjax]

args <- commandArgs(trailingOnly = TRUE)
node_modules <- if (length(args) >= 1) args[[1]] else ".setup/site/node_modules"
mathjax <- if (length(args) >= 2) args[[2]] else "/usr/share/javascript/mathjax"
site <- "docs"

# What goes into vendor/: each file or folder, at root/path there, from
# `path` under its root (npm's node_modules, Debian's MathJax, tools/site);
# the link pkgdown writes that it replaces (none for what those files load
# themselves; `cdnjs:` is cdnjs.cloudflare.com's libraries), and whether it
# is the very file the link's integrity hash is for.
roots <- c(npm = node_modules, mathjax = mathjax, site = "tools/site")
cdnjs <- "https://cdnjs.cloudflare.com/ajax/libs/"
vendor <- utils::read.table(
  header = TRUE,
  na.strings = "-",
  text = "
  root    path                                          url                                             identical
  npm     @fortawesome/fontawesome-free/css/all.min.css cdnjs:font-awesome/5.12.1/css/all.min.css       TRUE
  npm     @fortawesome/fontawesome-free/css/v4-shims.min.css cdnjs:font-awesome/5.12.1/css/v4-shims.min.css TRUE
  npm     @fortawesome/fontawesome-free/webfonts        -                                               -
  site    toc.js  https://cdn.jsdelivr.net/gh/afeld/bootstrap-toc@v1.0.1/dist/bootstrap-toc.min.js      FALSE
  npm     headroom.js/dist/headroom.min.js              cdnjs:headroom/0.11.0/headroom.min.js           TRUE
  npm     headroom.js/dist/jQuery.headroom.min.js       cdnjs:headroom/0.11.0/jQuery.headroom.min.js    TRUE
  npm     clipboard/dist/clipboard.min.js               cdnjs:clipboard.js/2.0.6/clipboard.min.js       TRUE
  npm     fuse.js/dist/fuse.js                          cdnjs:fuse.js/6.4.6/fuse.js                     TRUE
  npm     autocomplete.js/dist/autocomplete.jquery.min.js cdnjs:autocomplete.js/0.38.0/autocomplete.jquery.min.js TRUE
  npm     mark.js/dist/mark.min.js                      cdnjs:mark.js/8.11.1/mark.min.js                TRUE
  mathjax MathJax.js                                    file:///usr/share/javascript/mathjax/MathJax.js FALSE
  mathjax MathJax.js                                    cdnjs:mathjax/2.7.5/MathJax.js                  FALSE
  mathjax config/TeX-AMS_CHTML.js                       cdnjs:mathjax/2.7.5/config/TeX-AMS-MML_HTMLorMML.js FALSE
  mathjax extensions                                    -                                               -
  mathjax fonts                                         -                                               -
  mathjax jax                                           -                                               -
  mathjax localization                                  -                                               -"
)
vendor$from <- file.path(roots[vendor$root], vendor$path)
vendor$file <- file.path(vendor$root, vendor$path)
vendor$url <- sub("^cdnjs:", cdnjs, vendor$url)
links <- vendor[!is.na(vendor$url), ]

main <- function() {
  missing <- unique(vendor$from[!file.exists(vendor$from)])
  if (length(missing) > 0) {
    stop(
      "The site's front-end libraries are missing (run `make site`):\n",
      paste0("  ", missing, collapse = "\n"),
      call. = FALSE
    )
  }
  # The articles and examples run customgrad: without a backend they would
  # be built without their output and plots.
  if (!customgrad::backend_available()) {
    stop(
      "No Keras backend is ready, so the articles can't run: ",
      "run `make setup` first (see customgrad::customgrad_config()).",
      call. = FALSE
    )
  }

  unlink(site, recursive = TRUE)
  # No look-ups of the package on CRAN or Bioconductor: the build is offline.
  options(pkgdown.internet = FALSE)
  # A fresh process with the package installed from this source tree.
  pkgdown::build_site(".", preview = FALSE, new_process = TRUE, install = TRUE)

  copy_vendor(file.path(site, "vendor"))
  pages <- list.files(site, pattern = "\\.html$", recursive = TRUE)
  for (page in pages) {
    localize_page(site, page)
  }
  message(
    "Pointed ",
    length(pages),
    " pages at the libraries in ",
    site,
    "/vendor"
  )
}

copy_vendor <- function(dir) {
  for (i in seq_len(nrow(vendor))) {
    from <- vendor$from[[i]]
    dest <- file.path(dir, vendor$file[[i]])
    if (dir.exists(from)) {
      dir.create(dest, recursive = TRUE, showWarnings = FALSE)
      # Copy the folder's contents, following symbolic links.
      ok <- file.copy(
        list.files(from, full.names = TRUE),
        dest,
        recursive = TRUE,
        overwrite = TRUE
      )
    } else {
      dir.create(dirname(dest), recursive = TRUE, showWarnings = FALSE)
      ok <- file.copy(from, dest, overwrite = TRUE)
    }
    if (!all(ok)) {
      stop("Could not copy ", from, " to ", dest, call. = FALSE)
    }
  }
}

# Point one page's links at vendor/, relative to the page, then make sure
# nothing outside the site is loaded (HTML comments, such as the one for
# Internet Explorer 8, load nothing).
localize_page <- function(site, page) {
  path <- file.path(site, page)
  html <- paste(
    readLines(path, warn = FALSE, encoding = "UTF-8"),
    collapse = "\n"
  )
  depth <- lengths(strsplit(page, "/", fixed = TRUE)) - 1
  root <- strrep("../", depth)
  for (i in seq_len(nrow(links))) {
    url <- regex_escape(links$url[[i]])
    local <- paste0(root, "vendor/", links$file[[i]])
    pattern <- if (links$identical[[i]]) {
      paste0('(src|href)="', url, '"')
    } else {
      # Another file than the hash is for: drop the hash.
      paste0(
        '(src|href)="',
        url,
        '"( integrity="[^"]*")?( crossorigin="[^"]*")?'
      )
    }
    html <- gsub(pattern, paste0('\\1="', local, '"'), html, perl = TRUE)
  }
  # pkgdown 2.0.7 writes an empty logo where a package has none.
  html <- gsub('<img src="" class="logo" alt="">', "", html, fixed = TRUE)
  loaded <- gsub("(?s)<!--.*?-->", "", html, perl = TRUE)
  tags <- regmatches(
    loaded,
    gregexpr("<(script|link)\\b[^>]*>", loaded, perl = TRUE)
  )[[1]]
  # A <link> that loads nothing (rel="alternate", "canonical") may point out.
  outside <- tags[
    grepl('\\b(src|href)="(https?:|file:|//)', tags, perl = TRUE) &
      !grepl('rel="(alternate|canonical)"', tags)
  ]
  if (length(outside) > 0) {
    stop(
      page,
      " loads from outside the site; add these to tools/build-site.R:\n",
      paste0("  ", outside, collapse = "\n"),
      call. = FALSE
    )
  }
  con <- file(path, open = "wb")
  on.exit(close(con))
  writeLines(enc2utf8(html), con, useBytes = TRUE)
}

regex_escape <- function(x) {
  gsub("([][{}()+*^$|\\\\?.])", "\\\\\\1", x, perl = TRUE)
}

main()
