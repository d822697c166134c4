# customgrad: `make demo` and `make test` set up everything they need (R and
# R packages from Debian, the package itself, its Python environment) and
# are quick once that is done.

SHELL := /bin/bash
BACKENDS := tensorflow jax torch
SETUP := .setup
PKG_SOURCES := DESCRIPTION NAMESPACE $(wildcard R/*.R) \
	$(shell find inst -type f -not -path '*/__pycache__/*' -not -path '*/.pytest_cache/*' 2>/dev/null)

# NOTEs that `make check` accepts, one regular expression each, with why:
#  - none yet.
ALLOWED_NOTES :=

.PHONY: setup demo test test-keras-previous check bench soak clean

setup: $(SETUP)/docs.stamp

$(SETUP)/system.stamp: tools/setup-system.sh tools/setup-r-packages.R
	@mkdir -p $(SETUP)
	tools/setup-system.sh
	@touch $@

$(SETUP)/package.stamp: $(SETUP)/system.stamp $(PKG_SOURCES)
	R CMD INSTALL --no-test-load . >$(SETUP)/install.log 2>&1 || { cat $(SETUP)/install.log; exit 1; }
	@touch $@

# install_customgrad() is itself idempotent; the stamp only saves starting R.
$(SETUP)/python.stamp: $(SETUP)/package.stamp inst/python/requirements.txt
	Rscript -e 'customgrad::install_customgrad(extra_packages = "pytest")'
	@touch $@

# The package again, from a tarball with its vignettes built (they run
# customgrad, so they need the Python environment above), so that
# vignette("custom-gradients") works after `make demo`.
$(SETUP)/docs.stamp: $(SETUP)/python.stamp $(wildcard vignettes/*.Rmd)
	rm -rf $(SETUP)/build && mkdir -p $(SETUP)/build
	cd $(SETUP)/build && R CMD build --no-manual ../.. >../build.log 2>&1 || { cat ../build.log; exit 1; }
	R CMD INSTALL --no-test-load $(SETUP)/build/customgrad_*.tar.gz >$(SETUP)/install.log 2>&1 || { cat $(SETUP)/install.log; exit 1; }
	@touch $@

demo: setup
	@for b in $(BACKENDS); do KERAS_BACKEND=$$b Rscript tools/demo.R || exit 1; done

test: setup
	Rscript tools/run-tests.R $(BACKENDS)

# pytest on every backend, and the R tests of saving, tracing and Keras
# internals, against the previous Keras minor release, in an environment of
# its own under .setup (tools/test-keras-previous.sh); not part of `make test`.
KERAS_PREVIOUS := 3.14.1

test-keras-previous: setup
	tools/test-keras-previous.sh $(KERAS_PREVIOUS) $(SETUP)/keras-$(KERAS_PREVIOUS) $(BACKENDS)

check: setup
	Rscript tools/check.R $(ALLOWED_NOTES)

bench: setup
	Rscript bench/run.R

# 20,000 eager steps per backend, checking that memory and live objects stay
# bounded (tools/soak.R); minutes per backend, so not part of `make test`.
soak: setup
	Rscript tools/soak.R $(BACKENDS)

clean:
	rm -rf $(SETUP) check customgrad_*.tar.gz
