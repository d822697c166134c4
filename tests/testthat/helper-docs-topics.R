# Helpers for test-docs-topics.R: the help topics and vignettes that the
# README, the vignettes, the help pages and the messages name, found in
# their text and looked up as R would look them up when typed. No Python.

# The text a reader meets, one string per source: README.md, NEWS.md, each
# vignette and each Rd file with its lines joined by spaces (so that a
# mention broken over two lines is whole), then the messages.
docs_texts <- function(root) {
  files <- c(
    file.path(root, c("README.md", "NEWS.md")),
    list.files(file.path(root, "vignettes"), "\\.Rmd$", full.names = TRUE),
    list.files(file.path(root, "man"), "\\.Rd$", full.names = TRUE)
  )
  texts <- vapply(
    files,
    \(file) paste(readLines(file, warn = FALSE), collapse = " "),
    ""
  )
  names(texts) <- substring(files, nchar(root) + 2L)
  c(texts, message_texts(root), docs_hint_texts(root))
}

# The string constants of the R code in R/ (messages, the error table), as
# R holds them, named by file and line.
message_texts <- function(root) {
  files <- list.files(file.path(root, "R"), "\\.R$", full.names = TRUE)
  texts <- lapply(files, function(file) {
    data <- utils::getParseData(parse(file, keep.source = TRUE))
    strings <- data[data$token == "STR_CONST", ]
    values <- vapply(
      strings$text,
      \(s) eval(str2lang(s)),
      "",
      USE.NAMES = FALSE
    )
    names(values) <- sprintf("R/%s:%d", basename(file), strings$line1)
    values
  })
  unlist(texts)
}

# The hints that messages print through docs_hint() (R/docs.R), which
# builds them from a template: every docs_hint() call in R/ evaluated with
# the vignettes installed and without them.
docs_hint_texts <- function(root) {
  files <- list.files(file.path(root, "R"), "\\.R$", full.names = TRUE)
  calls <- unlist(
    lapply(files, \(file) find_calls(as.list(parse(file)), "docs_hint")),
    recursive = FALSE
  )
  hint <- function(call, installed) {
    local_vignettes_installed(installed)
    eval(call, list(docs_hint = customgrad:::docs_hint))
  }
  texts <- c(
    vapply(calls, hint, "", installed = TRUE),
    vapply(calls, hint, "", installed = FALSE)
  )
  names(texts) <- rep(
    vapply(calls, \(call) paste(deparse(call), collapse = " "), ""),
    2
  )
  texts
}

# The calls of the function `name` anywhere in the expressions `exprs`.
find_calls <- function(exprs, name) {
  found <- list()
  walk <- function(x) {
    if (!is.call(x)) {
      return()
    }
    if (identical(x[[1]], as.name(name))) {
      found[[length(found) + 1L]] <<- x
    }
    for (part in as.list(x)[-1]) {
      if (!missing(part)) walk(part)
    }
  }
  for (expr in exprs) {
    walk(expr)
  }
  found
}

# Every mention of a help topic or a vignette in `texts`, as written: one
# row per mention, with its source and its text. Three forms: `?topic`
# (after a space, a quote, a bracket or `\code{`), help(...) and
# vignette(...), with one level of parentheses inside.
docs_mentions <- function(texts) {
  patterns <- c(
    question = paste0(
      "(?:(?<![^\\s`(\\[\"'])|(?<=\\\\code\\{))",
      "\\?(?:[A-Za-z][A-Za-z0-9.]*:::?)?",
      "[A-Za-z.][A-Za-z0-9._]*(?:-[A-Za-z0-9._]+)*"
    ),
    help = "(?<![A-Za-z0-9._])help\\((?:[^()]|\\([^()]*\\))*\\)",
    vignette = "(?<![A-Za-z0-9._])vignette\\((?:[^()]|\\([^()]*\\))*\\)"
  )
  rows <- lapply(names(patterns), function(form) {
    found <- regmatches(texts, gregexpr(patterns[[form]], texts, perl = TRUE))
    data.frame(
      source = rep(names(texts), lengths(found)),
      form = rep(form, sum(lengths(found))),
      # a `?topic` at the end of a sentence leaves its full stop out
      text = sub("(?<=[A-Za-z0-9_])\\.+$", "", unlist(found), perl = TRUE)
    )
  })
  mentions <- do.call(rbind, rows)
  # sprintf() templates (`vignette("%s", ...)`) are checked through
  # docs_hint_texts(), which fills them in.
  mentions[!grepl("%s", mentions$text, fixed = TRUE), ]
}

# Why `mention` (a `?topic`, help() or vignette() as written) doesn't
# resolve when typed, or "" when it does. `aliases`: customgrad's help
# topics (from man/); `vignettes`: customgrad's vignettes (from
# vignettes/).
docs_unresolved <- function(mention, aliases, vignettes) {
  call <- tryCatch(str2lang(mention), error = function(e) NULL)
  if (!is.call(call)) {
    return("R can't parse it")
  }
  what <- as.character(call[[1]])
  if (identical(what, "?")) {
    target <- call[[2]]
    if (is.name(target)) {
      return(topic_unresolved(as.character(target), NULL, aliases))
    }
    if (is.call(target) && as.character(target[[1]]) %in% c("::", ":::")) {
      package <- as.character(target[[2]])
      return(topic_unresolved(as.character(target[[3]]), package, aliases))
    }
    return(sprintf("R reads it as `?(%s)`", deparse(target)))
  }
  if (identical(what, "help")) {
    args <- as.list(match.call(utils::help, call))[-1]
    package <- name_or_string(args$package)
    if (is.null(args$topic)) {
      return(package_unresolved(package))
    }
    topic <- name_or_string(args$topic)
    if (is.null(topic)) {
      return("its topic is neither a name nor a string")
    }
    return(topic_unresolved(topic, package, aliases))
  }
  args <- as.list(match.call(utils::vignette, call))[-1]
  package <- if (is.character(args$package)) args$package
  if (!is.null(args$package) && is.null(package)) {
    return("its package is not a string")
  }
  if (is.null(args$topic)) {
    return(package_unresolved(if (is.null(package)) "customgrad" else package))
  }
  if (!is.character(args$topic)) {
    return(sprintf(
      "vignette() takes the vignette's name as a string, not `%s`",
      deparse(args$topic)
    ))
  }
  if (is.null(package) || identical(package, "customgrad")) {
    if (args$topic %in% vignettes) {
      return("")
    }
    return("customgrad has no such vignette")
  }
  info <- tools::getVignetteInfo(package)
  if (args$topic %in% info[, "Topic"]) "" else "no such vignette"
}

# A name or a string given to help(), as a string; NULL otherwise.
name_or_string <- function(x) {
  if (is.name(x)) {
    return(as.character(x))
  }
  if (is.character(x) && length(x) == 1L) x
}

package_unresolved <- function(package) {
  if (nzchar(system.file(package = package))) "" else "no such package"
}

# Where `topic` is found: customgrad's own topics from man/, else, unless
# another package is named, those of keras3 (which library(customgrad)
# attaches) and of the packages R attaches by default.
topic_unresolved <- function(topic, package, aliases) {
  if (identical(package, "customgrad")) {
    return(if (topic %in% aliases) "" else "customgrad has no such topic")
  }
  if (!is.null(package)) {
    if (has_help(topic, package)) {
      return("")
    }
    return(sprintf("%s has no such topic", package))
  }
  if (topic %in% aliases) {
    return("")
  }
  attached <- c(
    "keras3",
    "base",
    "utils",
    "stats",
    "methods",
    "graphics",
    "grDevices"
  )
  for (package in attached) {
    if (has_help(topic, package)) {
      return("")
    }
  }
  "no help topic of customgrad, keras3 or base R"
}

# Whether the installed package `package` has the help topic `topic`.
has_help <- function(topic, package) {
  if (!nzchar(system.file(package = package))) {
    return(FALSE)
  }
  # do.call(): help() takes a name for `package` unevaluated
  found <- do.call(utils::help, list(topic, package = package))
  length(found) > 0L
}

# customgrad's help topics: the aliases of man/*.Rd.
rd_aliases <- function(root) {
  files <- list.files(file.path(root, "man"), "\\.Rd$", full.names = TRUE)
  lines <- unlist(lapply(files, readLines, warn = FALSE))
  aliases <- sub(
    "^\\\\alias\\{(.*)\\}\\s*$",
    "\\1",
    grep("^\\\\alias\\{", lines, value = TRUE)
  )
  gsub("\\\\(.)", "\\1", aliases)
}

# customgrad's vignettes: the names of vignettes/*.Rmd.
source_vignette_names <- function(root) {
  files <- list.files(file.path(root, "vignettes"), "\\.Rmd$")
  sub("\\.Rmd$", "", files)
}

# The mentions in `texts` that don't resolve, as "source: mention (why)".
docs_unresolved_mentions <- function(texts, root) {
  mentions <- docs_mentions(texts)
  aliases <- rd_aliases(root)
  vignettes <- source_vignette_names(root)
  why <- vapply(
    mentions$text,
    docs_unresolved,
    "",
    aliases = aliases,
    vignettes = vignettes,
    USE.NAMES = FALSE
  )
  bad <- nzchar(why)
  sprintf("%s: %s (%s)", mentions$source[bad], mentions$text[bad], why[bad])
}

# What _pkgdown.yml names that doesn't exist: reference entries that are no
# help topic in man/, articles that are no vignette, navbar entries that
# are neither one of pkgdown's own nor defined under `components`, and
# component links to articles that are not there. pkgdown 2.0's `intro` is
# there only with a vignette named as the package.
pkgdown_dangling <- function(root) {
  config <- yaml::read_yaml(file.path(root, "_pkgdown.yml"))
  aliases <- rd_aliases(root)
  vignettes <- source_vignette_names(root)
  topics <- unlist(lapply(config$reference, `[[`, "contents"))
  articles <- unlist(lapply(config$articles, `[[`, "contents"))
  components <- config$navbar$components
  builtin <- c("home", "reference", "articles", "tutorials", "news")
  builtin <- c(builtin, "search", "github")
  if ("customgrad" %in% vignettes) {
    builtin <- c(builtin, "intro")
  }
  navbar <- unlist(config$navbar$structure)
  hrefs <- unlist(lapply(components, `[[`, "href"))
  linked <- sub(
    "^articles/(.*)\\.html$",
    "\\1",
    grep("^articles/", hrefs, value = TRUE)
  )
  c(
    sprintf("reference: %s", setdiff(topics, aliases)),
    sprintf("articles: %s", setdiff(articles, vignettes)),
    sprintf("navbar: %s", setdiff(navbar, c(builtin, names(components)))),
    sprintf("navbar link: %s", setdiff(linked, vignettes))
  )
}

# The help topics in man/ that are not internal but that _pkgdown.yml's
# reference index leaves out (pkgdown refuses to build then).
pkgdown_unlisted <- function(root) {
  config <- yaml::read_yaml(file.path(root, "_pkgdown.yml"))
  listed <- unlist(lapply(config$reference, `[[`, "contents"))
  files <- list.files(file.path(root, "man"), "\\.Rd$", full.names = TRUE)
  public <- Filter(
    \(file) !any(grepl("^\\\\keyword\\{internal\\}", readLines(file))),
    files
  )
  names <- vapply(
    public,
    \(file) {
      line <- grep("^\\\\name\\{", readLines(file), value = TRUE)[[1]]
      sub("^\\\\name\\{(.*)\\}\\s*$", "\\1", line)
    },
    "",
    USE.NAMES = FALSE
  )
  setdiff(names, listed)
}
