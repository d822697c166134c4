# `make pythons`: the README's quick start, verbatim, in a fresh R process
# for every Python keras3 would use: keras3's `r-keras`, one that reticulate
# provisions with uv (nothing configured), and an explicit RETICULATE_PYTHON
# (the development environment). Each must train (the loss falls), use the
# Python it should, say why in customgrad_config(), and print no error.
# (TensorFlow's start-up lines are TensorFlow's: customgrad leaves them.)
# Usage: Rscript tools/pythons.R UV [ROUTE...]
#   UV: the uv binary (installed from PyPI by the Makefile).
args <- commandArgs(trailingOnly = TRUE)
uv <- normalizePath(args[[1]])
routes <- if (length(args) > 1) {
  args[-1]
} else {
  c("r-keras", "provisioned", "RETICULATE_PYTHON")
}
setup <- normalizePath(".setup")
# The development environment, which the Makefile chooses.
ours <- Sys.getenv(
  "RETICULATE_PYTHON",
  file.path(setup, "venv", "bin", "python")
)

# The README's first R chunk (the quick start), and lines reporting the
# loss and the Python in use.
readme <- readLines("README.md")
start <- which(readme == "```r")[[1]]
end <- min(which(readme == "```" & seq_along(readme) > start))
chunk <- readme[(start + 1):(end - 1)]
script <- tempfile("quick-start", fileext = ".R")
writeLines(
  c(
    chunk,
    "cat('LOSS', history$metrics$loss, '\\n')",
    "cat('PYTHON', reticulate::py_config()$python, '\\n')",
    "cat('CHOSEN', customgrad_config()$chosen_by, '\\n')"
  ),
  script
)

# What pip is configured with (its index, extra indexes, local wheels),
# for uv, which does not read pip's configuration.
pip_index_env <- function() {
  lines <- system2(
    "/usr/bin/python3.11",
    c("-m", "pip", "config", "list"),
    stdout = TRUE,
    stderr = FALSE
  )
  value <- function(key) {
    hit <- grep(paste0("^(global|:env:)\\.", key, "="), lines, value = TRUE)
    if (length(hit) == 0) {
      return(NULL)
    }
    gsub("^'|'$", "", sub("^[^=]*=", "", hit[[1]]))
  }
  c(
    UV_DEFAULT_INDEX = value("index-url"),
    UV_INDEX = value("extra-index-url"),
    UV_FIND_LINKS = value("find-links")
  )
}

# uv's download cache, kept between runs, and pip's configuration.
uv_env <- c(UV_CACHE_DIR = file.path(setup, "uv-cache"), pip_index_env())

# Everything a route may leave behind goes under `home`: a first run of a
# new environment each time, except uv's download cache (UV_CACHE_DIR).
route_env <- function(route, home) {
  clean <- c(
    R_USER_DATA_DIR = file.path(home, "data"),
    R_USER_CACHE_DIR = file.path(home, "cache"),
    WORKON_HOME = file.path(home, "venvs"),
    # Debian's Python only: no pyenv shims for uv or reticulate to find.
    PATH = "/usr/local/bin:/usr/bin:/bin"
  )
  switch(
    route,
    RETICULATE_PYTHON = c(clean, RETICULATE_PYTHON = ours),
    "r-keras" = clean,
    provisioned = c(
      clean,
      RETICULATE_UV = uv,
      UV_PYTHON_PREFERENCE = "only-system",
      uv_env
    )
  )
}

expected_python <- function(route, home) {
  switch(
    route,
    RETICULATE_PYTHON = ours,
    "r-keras" = file.path(home, "venvs", "r-keras", "bin", "python"),
    provisioned = NA_character_ # an ephemeral environment in uv's cache
  )
}

# This process's environment with `env` set, less the Python the Makefile
# chooses (RETICULATE_PYTHON, VIRTUAL_ENV): for processx::run().
child_env <- function(env) {
  out <- Sys.getenv()
  out <- out[!names(out) %in% c("RETICULATE_PYTHON", "VIRTUAL_ENV")]
  out[names(env)] <- env
  out
}

# keras3's r-keras, made as install_keras() would (a virtual environment
# named r-keras where keras3 looks), with uv for speed.
make_r_keras <- function(home, env) {
  venv <- file.path(home, "venvs", "r-keras")
  python <- file.path(venv, "bin", "python")
  packages <- c("keras", "tensorflow-cpu", "pydot", "scipy", "pandas", "Pillow")
  uv_run <- function(...) processx::run(uv, c(...), env = env, echo = TRUE)
  uv_run("venv", "--quiet", "--python", "/usr/bin/python3.11", venv)
  uv_run("pip", "install", "--quiet", "--python", python, packages)
}

# reticulate 1.46 with UV_PYTHON_PREFERENCE other than uv's default (here
# "only-system": Debian's Python, as no managed Python can be downloaded)
# looks for Pythons with py_exe() while it provisions, which provisions
# again, until R's C stack runs out; its try() prints that and provisioning
# goes on. Users with uv's default never meet it.
reticulate_recursion <- "^Error : C stack usage .* is too close to the limit"

failures <- character()
for (route in routes) {
  home <- tempfile(paste0("python-", route))
  dir.create(home)
  vars <- c(route_env(route, home), KERAS_BACKEND = "tensorflow")
  env <- child_env(vars)
  if (route == "r-keras") {
    make_r_keras(home, child_env(c(vars, uv_env)))
  }
  cat(sprintf("== %s ==\n", route))
  started <- Sys.time()
  run <- processx::run(
    "Rscript",
    script,
    env = env,
    error_on_status = FALSE,
    stderr_to_stdout = TRUE
  )
  out <- strsplit(run$stdout, "\n")[[1]]
  seconds <- as.numeric(Sys.time() - started, units = "secs")
  loss <- as.numeric(strsplit(
    sub("^LOSS ", "", grep("^LOSS ", out, value = TRUE)),
    " "
  )[[1]])
  python <- trimws(sub("^PYTHON ", "", grep("^PYTHON ", out, value = TRUE)))
  chosen <- trimws(sub("^CHOSEN ", "", grep("^CHOSEN ", out, value = TRUE)))
  want <- expected_python(route, home)
  problems <- c(
    if (run$status != 0) "the quick start failed",
    if (length(loss) < 2 || !all(diff(loss) < 0)) "the loss did not fall",
    if (length(python) != 1) "no Python reported",
    if (
      length(python) == 1 &&
        !is.na(want) &&
        normalizePath(python) != normalizePath(want)
    ) {
      paste("used", python, "instead of", want)
    },
    # customgrad_config() names the route.
    if (length(chosen) != 1 || !grepl(route, chosen, fixed = TRUE)) {
      paste0("customgrad_config() gave the reason '", chosen, "'")
    },
    if (any(grepl("^Error", out) & !grepl(reticulate_recursion, out))) {
      "an error was printed"
    }
  )
  cat(sprintf(
    "%s: %s (%.0f s), Python %s\n",
    route,
    if (length(problems)) paste(problems, collapse = "; ") else "trained",
    seconds,
    if (length(python) == 1) python else "?"
  ))
  if (length(problems)) {
    writeLines(out)
    failures <- c(failures, route)
  }
  unlink(home, recursive = TRUE)
}
if (length(failures)) {
  stop(
    "The quick start failed with these Pythons: ",
    paste(failures, collapse = ", ")
  )
}
