#!/usr/bin/env bash
# `make test-keras-previous`: customgrad's Python tests on every backend,
# and R tests (listed below), against another Keras release (the previous
# minor one) than the pinned one.
#
# Its virtual environment holds only that Keras; every other package
# (backends, NumPy, pytest) comes from the development environment through
# a .pth file, which Python reads after the environment's own packages: the
# two differ in Keras alone, and making it takes seconds.
# Usage: tools/test-keras-previous.sh KERAS_VERSION ENV_DIR BACKEND...
set -euo pipefail

version=$1
# Absolute: testthat runs the tests in tests/testthat.
env_dir=$(realpath -m "$2")
shift 2
backends=("$@")

# The development Python, chosen by the Makefile.
base_python=${RETICULATE_PYTHON:-.setup/venv/bin/python}
python=$env_dir/bin/python

site_packages() {
  "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

keras_version() {
  "$python" -c 'import importlib.metadata as m; print(m.version("keras"))' 2>/dev/null || true
}

if [[ ! -x $python || $(keras_version) != "$version" ]]; then
  echo "== making $env_dir (Keras $version over $base_python) =="
  rm -rf "$env_dir"
  "$base_python" -m venv "$env_dir"
  site_packages "$base_python" >"$(site_packages "$python")/customgrad-base.pth"
  "$python" -m pip install --quiet --no-deps "keras==$version"
fi
if [[ $(keras_version) != "$version" ]]; then
  echo "Keras $version is not what $python imports: $(keras_version)" >&2
  exit 1
fi

failed=0
for backend in "${backends[@]}"; do
  echo
  echo "== pytest on $backend, Keras $version =="
  KERAS_BACKEND=$backend TF_CPP_MIN_LOG_LEVEL=3 \
    "$python" -m pytest -q -p no:cacheprovider inst/python/tests || failed=1
done

# The R tests of saving, tracing and Keras internals, and those that alone
# check behaviours the Python tests leave to R; with each backend, its own
# files among them (test-*-<backend>.R). One R process per backend.
r_tests=(
  keras-internals layers trace captures compile gradcheck gradients
  custom-gradient custom-gradient-errors custom-gradient-fuzz
  custom-gradient-keras custom-gradient-recursion host python-errors
  transforms
)
for backend in "${backends[@]}"; do
  filter="^($(IFS='|'; echo "${r_tests[*]}")|custom-gradient-$backend|host-$backend)\$"
  echo
  echo "== R tests on $backend, Keras $version =="
  # CI=true: a backend that can't run fails the test (helper-backend.R).
  RETICULATE_PYTHON=$python KERAS_BACKEND=$backend NOT_CRAN=true CI=true \
    Rscript -e "
      r <- as.data.frame(testthat::test_dir(
        'tests/testthat', filter = '$filter', package = 'customgrad',
        load_package = 'installed', stop_on_failure = FALSE,
        reporter = testthat::SummaryReporter\$new(show_praise = FALSE)
      ))
      keras <- reticulate::py_to_r(reticulate::py_get_attr(
        reticulate::import('keras'), '__version__'
      ))
      if (keras != '$version') stop('R ran Keras ', keras)
      if (any(r\$failed > 0 | r\$error | r\$skipped)) quit(status = 1)
    " || failed=1
done

if [[ $failed != 0 ]]; then
  echo "Some tests failed against Keras $version." >&2
  exit 1
fi
echo
echo "All tests passed against Keras $version."
