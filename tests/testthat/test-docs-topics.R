# Every help topic and vignette that the README, NEWS, the vignettes, the
# help pages and the messages name can be typed as written: each `?topic`,
# help(...) and vignette(...) mention is looked up as R would look it up.
# No backend: the text is read from the source tree.

test_that("every ?topic, help() and vignette() mention resolves as typed", {
  root <- dirname(skip_without_source("DESCRIPTION"))
  texts <- docs_texts(root)
  mentions <- docs_mentions(texts)
  # The README, the vignettes, the Rd files and the messages all name some.
  expect_true(any(mentions$source == "README.md"))
  expect_true(any(mentions$source == "NEWS.md"))
  expect_true(any(startsWith(mentions$source, "vignettes/")))
  expect_true(any(startsWith(mentions$source, "man/")))
  expect_true(any(startsWith(mentions$source, "docs_hint(")))
  expect_setequal(unique(mentions$form), c("question", "help", "vignette"))

  expect_equal(docs_unresolved_mentions(texts, root), character())
})

test_that("the extractor finds known mentions, and unresolvable ones fail", {
  root <- dirname(skip_without_source("DESCRIPTION"))
  texts <- docs_texts(root)
  mentions <- docs_mentions(texts)
  readme <- mentions$text[mentions$source == "README.md"]
  expect_true("?op_custom_gradient" %in% readme)
  expect_true("help(package = \"customgrad\")" %in% readme)
  hints <- mentions$text[startsWith(mentions$source, "docs_hint(")]
  expect_true(
    "vignette(\"troubleshooting\", package = \"customgrad\")" %in% hints
  )
  expect_true("?layer_custom_gradient" %in% hints)

  # What a newcomer typed and R misread, and names that don't exist.
  made_up <- c(
    a = "See `?gradient-ops` and `?customgrad-errors`.",
    b = "Run `vignette(customgrad::troubleshooting)` or `vignette(\"intro\")`.",
    c = "See ?no_such_topic_anywhere or `help(\"no_such\", package = \"keras3\")`.",
    d = "{.code ?keras3::op_stop_gradient} and `help(fit)`: fine; {?s}, `x?`."
  )
  expect_equal(
    docs_unresolved_mentions(made_up, root),
    c(
      "a: ?gradient-ops (R reads it as `?(gradient - ops)`)",
      "a: ?customgrad-errors (R reads it as `?(customgrad - errors)`)",
      "c: ?no_such_topic_anywhere (no help topic of customgrad, keras3 or base R)",
      "c: help(\"no_such\", package = \"keras3\") (keras3 has no such topic)",
      "b: vignette(customgrad::troubleshooting) (vignette() takes the vignette's name as a string, not `customgrad::troubleshooting`)",
      "b: vignette(\"intro\") (customgrad has no such vignette)"
    )
  )
})

test_that("the old names of renamed topics still open them with help()", {
  root <- dirname(skip_without_source("DESCRIPTION"))
  aliases <- rd_aliases(root)
  expect_true(all(
    c(
      "gradient_ops",
      "gradient-ops",
      "customgrad_errors",
      "customgrad-errors"
    ) %in%
      aliases
  ))
  found <- utils::help("gradient-ops", package = "customgrad")
  expect_equal(basename(as.character(found)), "gradient_ops")
})

test_that("a message's pointer names a section its vignette has", {
  root <- dirname(skip_without_source("DESCRIPTION"))
  files <- list.files(file.path(root, "R"), "\\.R$", full.names = TRUE)
  calls <- unlist(
    lapply(files, \(file) find_calls(as.list(parse(file)), "docs_hint")),
    recursive = FALSE
  )
  expect_gt(length(calls), 0)
  aliases <- rd_aliases(root)
  missing_sections <- as.character(unlist(lapply(calls, function(call) {
    args <- as.list(match.call(customgrad:::docs_hint, call))[-1]
    rmd <- file.path(root, "vignettes", paste0(args$vignette, ".Rmd"))
    headings <- if (file.exists(rmd)) {
      lines <- readLines(rmd, warn = FALSE)
      trimws(sub("^#+", "", grep("^#+ ", lines, value = TRUE)))
    }
    c(
      if (!args$section %in% headings) {
        sprintf("%s: \"%s\"", args$vignette, args$section)
      },
      if (!args$topic %in% aliases) sprintf("?%s", args$topic)
    )
  })))
  expect_equal(missing_sections, character())
})

test_that("_pkgdown.yml names only topics, articles and entries that exist", {
  root <- dirname(skip_without_source("_pkgdown.yml"))
  skip_if_not_installed("yaml")
  expect_equal(pkgdown_dangling(root), character())
  expect_equal(pkgdown_unlisted(root), character())
})
