# customgrad: `make demo` and `make test` set up everything they need (R and
# R packages from Debian, the package itself, its Python environment) and
# are quick once that is done.

SHELL := /bin/bash
BACKENDS := tensorflow jax torch
SETUP := .setup
PKG_SOURCES := DESCRIPTION NAMESPACE $(wildcard R/*.R) \
	$(shell find inst -type f -not -path '*/__pycache__/*' -not -path '*/.pytest_cache/*' 2>/dev/null)

# The development Python (tools/setup-python.sh), chosen explicitly for
# every R and Python process make starts. Users' sessions never see it:
# customgrad uses the Python keras3 would use.
DEV_PYTHON := $(CURDIR)/$(SETUP)/venv/bin/python
export RETICULATE_PYTHON := $(DEV_PYTHON)
# The backends `make coverage` runs the suites on, combined (each one in its
# own process): make coverage COVERAGE_BACKENDS="tensorflow jax torch".
COVERAGE_BACKENDS := tensorflow

# NOTEs that `make check` accepts, one regular expression each, with why:
#  - none yet.
ALLOWED_NOTES :=

.PHONY: setup demo distributed-demo test platforms test-keras-previous check cran-check lint coverage site site-check bench soak pythons clean

setup: $(SETUP)/docs.stamp

$(SETUP)/system.stamp: tools/setup-system.sh tools/setup-r-packages.R
	@mkdir -p $(SETUP)
	tools/setup-system.sh
	@touch $@

$(SETUP)/package.stamp: $(SETUP)/system.stamp $(PKG_SOURCES)
	R CMD INSTALL --no-test-load . >$(SETUP)/install.log 2>&1 || { cat $(SETUP)/install.log; exit 1; }
	@touch $@

$(SETUP)/python.stamp: $(SETUP)/system.stamp tools/setup-python.sh tools/python-dev-requirements.txt
	tools/setup-python.sh $(SETUP)/venv
	@touch $@

# The package again, from a tarball with its vignettes built (they run
# customgrad, so they need the Python environment above), so that
# vignette("custom-gradients") works after `make demo`. Not the snapshots:
# every testthat run writes them again, unchanged, and `make check` after
# `make test` would build and install everything once more.
$(SETUP)/docs.stamp: $(SETUP)/package.stamp $(SETUP)/python.stamp $(wildcard vignettes/*.Rmd) \
		$(shell find tests/testthat -type f -not -path '*/__pycache__/*' -not -path '*/_snaps/*' 2>/dev/null)
	rm -rf $(SETUP)/build && mkdir -p $(SETUP)/build
	cd $(SETUP)/build && R CMD build --no-manual ../.. >../build.log 2>&1 || { cat ../build.log; exit 1; }
	R CMD INSTALL --no-test-load $(SETUP)/build/customgrad_*.tar.gz >$(SETUP)/install.log 2>&1 || { cat $(SETUP)/install.log; exit 1; }
	@touch $@

demo: setup
	@for b in $(BACKENDS); do KERAS_BACKEND=$$b Rscript tools/demo.R || exit 1; done

# The example of a data-parallel run (inst/examples/distributed-train.R):
# 2 local R processes on JAX, each training on its shard, against one
# process on the combined batches (tools/distributed-demo.R).
distributed-demo: setup
	Rscript tools/distributed-demo.R 2 40

test: setup $(SETUP)/uv/bin/uv
	UV=$(SETUP)/uv/bin/uv Rscript tools/run-tests.R $(BACKENDS)

# What keras3 asks for with customgrad attached, per platform, backend and
# GPU setting, resolved from the package index (tools/check-platforms.R);
# a report of keras3's gaps, about ten minutes, not in CI.
platforms: setup $(SETUP)/uv/bin/uv
	Rscript tools/check-platforms.R $(SETUP)/uv/bin/uv "" --keras3

# pytest and the R tests the script lists, on every backend, against the
# previous Keras minor release, in an environment of its own under .setup
# (tools/test-keras-previous.sh); not part of `make test`.
KERAS_PREVIOUS := 3.14.1

test-keras-previous: setup
	tools/test-keras-previous.sh $(KERAS_PREVIOUS) $(SETUP)/keras-$(KERAS_PREVIOUS) $(BACKENDS)

check: setup
	Rscript tools/check.R $(ALLOWED_NOTES)

# CRAN's view (issue 61): the release tarball, its vignettes built above,
# checked with no Python chosen, no network and a fresh HOME
# (tools/cran-check.R): everything skips, and nothing is downloaded.
# Then the same with a Python that has Keras and JAX only.
CRAN_CHECK := env -u RETICULATE_PYTHON -u CI -u NOT_CRAN -u KERAS_BACKEND Rscript tools/cran-check.R
cran-check: setup $(SETUP)/keras-jax/bin/python
	$(CRAN_CHECK) $(wildcard $(SETUP)/build/customgrad_*.tar.gz) $(ALLOWED_NOTES)
	$(CRAN_CHECK) --python=$(CURDIR)/$(SETUP)/keras-jax/bin/python \
		$(wildcard $(SETUP)/build/customgrad_*.tar.gz) $(ALLOWED_NOTES)

# Keras and JAX at the development set's versions, and nothing else.
$(SETUP)/keras-jax/bin/python: tools/python-dev-requirements.txt
	rm -rf $(SETUP)/keras-jax
	/usr/bin/python3.11 -m venv $(SETUP)/keras-jax
	grep -E '^(numpy|keras|jax)' tools/python-dev-requirements.txt | \
		xargs $(SETUP)/keras-jax/bin/python -m pip install --quiet

# The documentation site in docs/ (not committed): pkgdown builds it with the
# articles run on TensorFlow (tools/build-site.R), then headless Chromium
# opens every page (tools/check-site.py: Selenium and chromedriver, from
# Debian). pkgdown 2.0 links its front-end libraries from CDNs, which CI
# can't reach, and Debian packages few of them at pkgdown's versions: they
# come from the npm registry, pinned by tools/site/package-lock.json.
site: setup $(SETUP)/site.stamp
	Rscript tools/build-site.R $(SETUP)/site/node_modules
	$(MAKE) site-check

# pkgdown's own check of _pkgdown.yml (every topic and article listed),
# then the built site in a real browser.
site-check:
	Rscript -e 'pkgdown::check_pkgdown()'
	/usr/bin/python3 tools/check-site.py docs

$(SETUP)/site.stamp: $(SETUP)/system.stamp tools/site/package.json tools/site/package-lock.json
	rm -rf $(SETUP)/site && mkdir -p $(SETUP)/site
	cp tools/site/package.json tools/site/package-lock.json $(SETUP)/site/
	cd $(SETUP)/site && npm ci --no-audit --no-fund --ignore-scripts >../site-npm.log 2>&1 || { cat ../site-npm.log; exit 1; }
	@touch $@

# lintr::lint_package() with the settings in .lintr; any lint fails. Needs
# only lintr (Debian's r-cran-lintr), not the package or Python.
lint: $(SETUP)/system.stamp
	Rscript tools/lint.R

# covr's coverage of R/ by the testthat suite and pytest-cov's of
# inst/python/customgrad by the pytest suite, on COVERAGE_BACKENDS; slow
# (the suites run instrumented), so not part of CI.
coverage: setup
	Rscript tools/coverage.R $(COVERAGE_BACKENDS)

bench: setup
	Rscript bench/run.R

# 20,000 eager steps per backend, checking that memory and live objects stay
# bounded (tools/soak.R); minutes per backend, so not part of `make test`.
soak: setup
	Rscript tools/soak.R $(BACKENDS)

# uv from PyPI: it resolves requirements for other platforms (make test,
# make platforms) and provisions the Python that `make pythons` checks.
UV_VERSION := 0.13.9
$(SETUP)/uv/bin/uv: $(SETUP)/system.stamp
	rm -rf $(SETUP)/uv
	/usr/bin/python3.11 -m venv $(SETUP)/uv
	$(SETUP)/uv/bin/pip install --quiet uv==$(UV_VERSION)

# The README's quick start in a fresh R process with every Python keras3
# would use (tools/pythons.R); downloads what the provisioned and r-keras
# environments need once (uv's cache is kept in .setup/uv-cache).
pythons: setup $(SETUP)/uv/bin/uv
	Rscript tools/pythons.R $(SETUP)/uv/bin/uv

clean:
	rm -rf $(SETUP) check docs customgrad_*.tar.gz
