#!/usr/bin/env bash
# Installs R and the R packages customgrad needs from Debian, then the
# keras3 stack (reticulate >= 1.42, tensorflow, keras3), which Debian lacks,
# with tools/setup-r-packages.R. Quick when everything is there: apt runs
# only for what is missing.
set -euo pipefail

packages=(
  r-base-core r-base-dev r-cran-rlang r-cran-cli r-cran-codetools
  r-cran-testthat r-cran-withr r-cran-callr r-cran-knitr r-cran-rmarkdown r-cran-yaml
  r-cran-roxygen2 pandoc qpdf tidy python3.11-venv
  # `make check` (rcmdcheck) and `make test` (xml2 reads pytest's JUnit)
  r-cran-rcmdcheck r-cran-xml2
  # `make lint`, `make coverage` and `make bench` (bench times the steps)
  r-cran-lintr r-cran-covr r-cran-bench
  # imports of reticulate, tensorflow and keras3 (tools/setup-r-packages.R)
  r-cran-matrix r-cran-rcpp r-cran-rcpptoml r-cran-here r-cran-jsonlite
  r-cran-png r-cran-rappdirs r-cran-backports r-cran-base64enc
  r-cran-magrittr r-cran-whisker r-cran-tidyselect r-cran-rstudioapi
  r-cran-processx r-cran-lifecycle r-cran-generics r-cran-zeallot
  r-cran-fastmap r-cran-glue
  # the documentation site (`make site`): pkgdown, the MathJax its pages
  # load, and the headless browser that checks them, with its Python client
  r-cran-pkgdown libjs-mathjax chromium chromium-driver python3-selenium
)
# npm, for the site's front-end libraries: the machine's Node.js has it;
# Debian's otherwise.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing from Debian: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

Rscript "$(dirname "$0")/setup-r-packages.R"
