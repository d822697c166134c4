# Helpers for the documentation tests (test-readme.R, test-vignettes.R):
# they run the README's chunks and render the vignettes from the package's
# source tree, each in a fresh R process on the backend of this one.

# The source tree the tests run from (`make test` from its root, or
# testthat::test_file() in tests/testthat), or NULL when they run from a
# copy of tests/ alone, as R CMD check runs them.
source_root <- function() {
  root <- normalizePath(test_path("..", ".."), mustWork = FALSE)
  desc <- file.path(root, "DESCRIPTION")
  if (!file.exists(desc)) {
    return(NULL)
  }
  package <- read.dcf(desc, fields = "Package")[1, 1]
  if (!identical(unname(package), "customgrad")) {
    return(NULL)
  }
  root
}

# The path of `path` in the source tree. Where the tests run without the
# source tree, the test skips, except under CI=true outside R CMD check
# (`make test` in CI), where a missing file fails it.
skip_without_source <- function(path) {
  root <- source_root()
  if (!is.null(root) && file.exists(file.path(root, path))) {
    return(file.path(root, path))
  }
  reason <- sprintf(
    "%s is in the source tree only, and the tests run from a copy without it (R CMD check).",
    path
  )
  checking <- nzchar(Sys.getenv("_R_CHECK_PACKAGE_NAME_")) ||
    grepl("\\.Rcheck", getwd())
  if (identical(Sys.getenv("CI"), "true") && !checking) {
    testthat::fail(sprintf(
      "Can't find %s from %s (CI=true: not skipped).",
      path,
      getwd()
    ))
  }
  testthat::skip(reason)
}

# Runs `script` with the arguments `args` in a fresh Rscript process, in the
# directory `wd`, with this process's library paths and backend. Returns the
# exit status and the output (stdout and stderr together).
run_rscript <- function(script, args, wd, timeout = 600) {
  out <- file.path(wd, paste0(basename(script), ".out"))
  result <- callr::rscript(
    script,
    cmdargs = args,
    libpath = .libPaths(),
    env = c(
      callr::rcmd_safe_env(),
      KERAS_BACKEND = customgrad:::backend_name(),
      NOT_CRAN = "true"
    ),
    wd = wd,
    stdout = out,
    stderr = "2>&1",
    timeout = timeout,
    fail_on_status = FALSE,
    show = FALSE
  )
  list(status = result$status, output = readLines(out, warn = FALSE))
}

# The fenced code chunks of a Markdown file: one row per chunk, with the
# fence's info string (`r`, `sh`, ...), the line the code starts on, the
# code, and the line before the fence.
markdown_chunks <- function(path) {
  lines <- readLines(path, warn = FALSE)
  fences <- grep("^```", lines)
  opening <- fences[c(TRUE, FALSE)]
  closing <- fences[c(FALSE, TRUE)]
  stopifnot(length(opening) == length(closing))
  chunks <- lapply(seq_along(opening), function(i) {
    from <- opening[[i]]
    to <- closing[[i]]
    list(
      lang = trimws(sub("^```", "", lines[[from]])),
      line = from + 1L,
      code = if (to > from + 1L) lines[(from + 1L):(to - 1L)] else character(),
      before = if (from > 1L) lines[[from - 1L]] else ""
    )
  })
  chunks
}

# The last lines of a process's output, for a failure message.
output_tail <- function(output, n = 40) {
  paste(utils::tail(output, n), collapse = "\n")
}

# Whether the line before a README chunk's fence marks it as not run by
# test-readme.R (an HTML comment, invisible on the page).
readme_not_run <- function(line) {
  grepl("^<!-- not run by tests/testthat/test-readme.R", line)
}

# Code to run after the README's quick start: it copies the model file that
# the quick start's save_model() call wrote to `model_file`, and saves
# inputs, targets and the model's predictions for them to `saved_file`.
readme_save_hook <- function(code, model_file, saved_file) {
  exprs <- as.list(parse(text = code, keep.source = FALSE))
  saves <- Filter(
    \(e) is.call(e) && identical(e[[1]], as.name("save_model")),
    exprs
  )
  if (length(saves) != 1) {
    testthat::fail("The README's quick start must save its model once.")
  }
  save <- saves[[1]]
  hook <- bquote(local({
    model <- .(save[[2]])
    stopifnot(file.copy(.(save[[3]]), .(model_file), overwrite = TRUE))
    n <- model$input_shape[[2]]
    x <- matrix(seq(-3, 3, length.out = 8 * n), ncol = n)
    saveRDS(
      list(
        x = x,
        y = rowSums(x^2),
        prediction = as.array(predict(model, x, verbose = 0))
      ),
      .(saved_file)
    )
  }))
  deparse(hook)
}

# Runs the R files `files` in order in one fresh R process (run-chunks.R)
# and fails with the file, the condition and the output's end if one raises
# an error or a warning. `what` names the source in the failure.
expect_chunks_run <- function(files, dir, what) {
  failure_file <- file.path(dir, "failure.txt")
  unlink(failure_file)
  script <- file.path(dir, "run-chunks.R")
  file.copy(test_path("run-chunks.R"), script, overwrite = TRUE)
  result <- run_rscript(script, c(failure_file, files), dir)
  if (result$status == 0) {
    testthat::succeed()
    return(invisible(result))
  }
  failure <- if (file.exists(failure_file)) readLines(failure_file)
  where <- if (length(failure)) basename(failure[[1]]) else "(the R process)"
  code <- if (length(failure)) readLines(failure[[1]]) else character()
  testthat::fail(paste0(
    "A chunk of ",
    what,
    " failed on ",
    customgrad:::backend_name(),
    ": ",
    where,
    "\n",
    paste(failure[-1], collapse = "\n"),
    "\n\nThe chunk:\n",
    paste(code, collapse = "\n"),
    "\n\nThe output's end:\n",
    output_tail(result$output)
  ))
}

# Renders `rmd` with rmarkdown in a fresh R process on this backend, from a
# copy of its directory (so that nothing is written into the source tree),
# and fails with the vignette's name, knitr's error and the output's end
# when it doesn't render.
expect_vignette_renders <- function(rmd) {
  dir <- withr::local_tempdir("vignette-")
  file.copy(dirname(rmd), dir, recursive = TRUE)
  copy <- file.path(dir, basename(dirname(rmd)), basename(rmd))
  script <- file.path(dir, "render.R")
  writeLines(
    deparse(bquote(
      rmarkdown::render(
        .(copy),
        output_dir = .(dir),
        intermediates_dir = .(dir),
        envir = new.env(parent = globalenv()),
        quiet = TRUE
      )
    )),
    script
  )
  result <- run_rscript(script, character(), dir)
  html <- file.path(dir, sub("\\.Rmd$", ".html", basename(rmd)))
  if (result$status == 0 && file.exists(html)) {
    testthat::succeed()
    return(invisible(html))
  }
  testthat::fail(paste0(
    "vignettes/",
    basename(rmd),
    " doesn't render on ",
    customgrad:::backend_name(),
    ":\n",
    output_tail(result$output)
  ))
}

# The vignettes' sources, from the source tree.
source_vignettes <- function() {
  dir <- skip_without_source("vignettes")
  files <- list.files(dir, pattern = "\\.Rmd$", full.names = TRUE)
  if (length(files) == 0) {
    testthat::fail("There are no vignettes in vignettes/.")
  }
  files
}
