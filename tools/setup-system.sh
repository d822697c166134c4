#!/usr/bin/env bash
# Installs R and the R packages customgrad needs from Debian (CRAN is not
# reachable here). Quick when everything is there: apt runs only for what is
# missing.
set -euo pipefail

packages=(
  r-base-core r-base-dev r-cran-reticulate r-cran-rlang r-cran-cli
  r-cran-testthat r-cran-withr r-cran-callr r-cran-knitr r-cran-rmarkdown
  r-cran-roxygen2 pandoc qpdf tidy python3.11-venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "Installing from Debian: ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
