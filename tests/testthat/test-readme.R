# The README's R chunks, verbatim, in fresh R sessions on the backend of this
# process; what the quick start's comments claim; and the quick start's
# model, saved there, loads in another session.

test_that("the README's R chunks run, and the quick start's model reloads", {
  skip_if_no_backend()
  skip_if_no_callr()
  readme <- skip_without_source("README.md")
  dir <- withr::local_tempdir("readme-")

  chunks <- Filter(\(chunk) chunk$lang == "r", markdown_chunks(readme))
  # Set-up chunks that change the machine (installing packages) say so in
  # a comment before their fence and are not run.
  marked <- vapply(chunks, \(chunk) readme_not_run(chunk$before), TRUE)
  chunks <- chunks[!marked]
  expect_gt(length(chunks), 2)

  # The quick start (the first chunk) saves its model; a copy and the
  # model's predictions are kept for the session that reloads it.
  model_file <- file.path(dir, "quick-start.keras")
  saved_file <- file.path(dir, "quick-start.rds")
  hook <- readme_save_hook(chunks[[1]]$code, model_file, saved_file)
  # What its comments claim, on every backend.
  claims <- quote(local({
    # "falls epoch by epoch"
    stopifnot(all(diff(unlist(history$metrics$loss)) < 0))
    # "1, where the naive formula [...] gives NaN" in float32
    x <- op_convert_to_tensor(100, "float32")
    stopifnot(as.numeric(op_grad(log1pexp)(x)) == 1)
    stopifnot(is.nan(as.numeric(op_grad(\(x) op_log(1 + op_exp(x)))(x))))
  }))

  # A chunk that attaches packages starts a session of its own; the others
  # go on in the last one.
  files <- lapply(chunks, function(chunk) {
    file <- file.path(dir, sprintf("README.md-line-%d.R", chunk$line))
    writeLines(chunk$code, file)
    file
  })
  hook_file <- file.path(dir, "quick-start-checks.R")
  writeLines(c(hook, deparse(claims)), hook_file)
  starts <- vapply(chunks, \(chunk) grepl("^library\\(", chunk$code[[1]]), TRUE)
  starts[[1]] <- TRUE
  sessions <- split(unlist(files), cumsum(starts))
  sessions[[1]] <- append(sessions[[1]], hook_file, after = 1)

  for (session in sessions) {
    expect_chunks_run(session, dir, "README.md")
  }

  # A new R session, without the R function: load_model() with the traces
  # saved in the model gives the same predictions, and the model trains.
  reload <- file.path(dir, "reload.R")
  writeLines(
    deparse(bquote({
      library(customgrad)
      saved <- readRDS(.(saved_file))
      model <- load_model(.(model_file))
      prediction <- as.array(predict(model, saved$x, verbose = 0))
      stopifnot(all.equal(prediction, saved$prediction, tolerance = 1e-5))
      history <- fit(model, saved$x, saved$y, epochs = 2, verbose = 0)
      stopifnot(all(is.finite(unlist(history$metrics$loss))))
    })),
    reload
  )
  expect_chunks_run(reload, dir, "the reload of the quick start's model")
})
