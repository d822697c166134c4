# The package's help page: every option customgrad reads is documented in
# its "Options" section.

test_that("every customgrad.* option the code reads is documented", {
  ns <- asNamespace("customgrad")
  code <- unlist(lapply(ls(ns, all.names = TRUE), function(name) {
    obj <- get(name, envir = ns)
    if (is.function(obj)) deparse(obj) else character()
  }))
  calls <- unlist(regmatches(
    code,
    gregexpr("getOption\\(\"customgrad\\.[a-z_]+", code)
  ))
  read <- unique(sub("getOption(\"", "", calls, fixed = TRUE))
  expect_gt(length(read), 2)
  rd <- tools::Rd_db("customgrad")[["customgrad-package.Rd"]]
  help_text <- paste(
    capture.output(tools::Rd2txt(rd, options = list(underline_titles = FALSE))),
    collapse = " "
  )
  for (option in read) {
    expect_match(help_text, option, fixed = TRUE, label = option)
  }
})
