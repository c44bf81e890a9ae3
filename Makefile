# Two commands do everything on a fresh clone:
#   make book   - create .venv, install, execute every figure notebook (quick scale), render _build/html
#   make test   - create .venv, install, run the whole test suite (unit, statistical, notebooks, browser)
SHELL := /bin/bash
PYTHON ?= python3
# USE_CONDA=1: use the active conda environment (conda env create -f environment.yml)
# instead of creating .venv.
ifeq ($(USE_CONDA),1)
VENV := $(CONDA_PREFIX)
else
VENV ?= .venv
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Quiet pip: the machine's extra package indexes print a warning per package.
PIP := $(PY) -m pip install -q --disable-pip-version-check

NOTEBOOKS := $(sort $(wildcard notebooks/*.md))
# The book: SCALE is the notebooks' papermill `scale` parameter; BOOK_ROOT the folder whose
# _build/ receives executed notebooks, staged sources and HTML (test-browser: _build/smoke).
SCALE ?= quick
BOOK_ROOT ?= .
BOOK_BUILD := $(patsubst ./%,%,$(BOOK_ROOT)/_build)
EXECUTED := $(patsubst notebooks/%.md,$(BOOK_BUILD)/executed/$(SCALE)/%.ipynb,$(NOTEBOOKS))
SMOKE := $(patsubst notebooks/%.md,_build/nbval/%.ipynb,$(NOTEBOOKS))
SRC := $(shell find src -name '*.py' 2>/dev/null)
BOOK_PAGES := $(shell find book -type f 2>/dev/null) _config.yml _toc.yml references.bib

.PHONY: install book paper test test-unit test-notebooks test-browser bench clean

install: $(STAMP)

ifeq ($(USE_CONDA),1)
# conda (environment.yml) already installed everything into the active environment:
# check it and register its kernel; no virtual environment is made.
$(STAMP): environment.yml
	@test -n "$(CONDA_PREFIX)" || { echo "USE_CONDA=1: activate the conda environment first"; exit 1; }
	$(PY) -c "import stochastic_transformers, numba, xarray, jupyter_book, papermill, nbval"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)
else
# torch: a CPU build 2.13.0 may lie in pip's find-links; installing it first keeps the
# ViT extra's range from pulling a multi-GB CUDA build.  Elsewhere the range decides.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PIP) "torch==2.13.0" 2>&1 | grep -v "is ignored" || true
	set -o pipefail; $(PIP) -e '.[book,test,vit]' 2>&1 | grep -v -e "is ignored" -e "BuildBackendWarning" || true
	$(PY) -c "import stochastic_transformers, numba, xarray, jupyter_book, papermill, nbval"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)
endif

# --- the book -------------------------------------------------------------
# Notebooks are executed by papermill (parameter scale=$(SCALE)) into the ignored folder
# $(BOOK_BUILD)/executed/$(SCALE); make re-executes only a notebook whose text or the
# library changed, and papermill fails the build at the first failing cell.  book_assets
# lays out the sources in $(BOOK_BUILD)/src with a local MathJax (npm's mathjax, in the
# ignored _build/node_modules) and jupyter-book renders them with warnings as errors,
# execution off.  A stamp (one per scale) skips the render when no input changed, so a second
# `make book` with nothing changed takes seconds.
MATHJAX := _build/node_modules/mathjax/es5/tex-mml-chtml.js
NB_DEPS := $(filter-out %/book_assets.py,$(SRC))

$(BOOK_BUILD)/executed/$(SCALE)/%.ipynb: notebooks/%.md $(NB_DEPS) | $(STAMP)
	@mkdir -p $(@D)
	$(VENV)/bin/jupytext --quiet --to ipynb --output $@.in.ipynb $<
	cd notebooks && $(abspath $(VENV))/bin/papermill --cwd . --kernel python3 --no-progress-bar \
	    -p scale $(SCALE) $(abspath $@.in.ipynb) $(abspath $@.tmp.ipynb)
	mv $@.tmp.ipynb $@ && rm -f $@.in.ipynb

$(MATHJAX):
	@command -v npm >/dev/null || { echo "make book: npm is needed to install MathJax (apt-get install npm)"; exit 1; }
	npm install --prefix _build --no-save --no-package-lock --no-audit --no-fund --loglevel=error mathjax@3.2.2
	@touch $@

$(BOOK_BUILD)/html/.built-$(SCALE): $(EXECUTED) $(BOOK_PAGES) $(wildcard notebooks/images/*) $(MATHJAX) \
                          src/stochastic_transformers/book_assets.py | $(STAMP)
	rm -f $(BOOK_BUILD)/html/.built-*
	$(PY) -m stochastic_transformers.book_assets $(BOOK_BUILD)/src --executed $(BOOK_BUILD)/executed/$(SCALE)
	$(VENV)/bin/jupyter-book build $(BOOK_BUILD)/src --path-output $(BOOK_ROOT) -W --keep-going -q
	BOOK_HTML=$(BOOK_BUILD)/html $(PY) -m pytest -q -p no:cacheprovider tests/browser/test_site.py \
	    -k "warning_or_an_error or injected_parameters"
	touch $@

book: $(STAMP) $(BOOK_BUILD)/html/.built-$(SCALE)
	@echo "Book ($(SCALE) scale): $(abspath $(BOOK_BUILD))/html/index.html"

# --- tests ----------------------------------------------------------------
test: $(STAMP)
	$(MAKE) test-unit
	$(MAKE) test-notebooks
	$(MAKE) test-browser

test-unit: $(STAMP)
	$(PY) -m pytest -q tests --ignore=tests/browser

# nbval reads only .ipynb: convert each text notebook, let papermill inject the smoke
# parameters without executing (--prepare-only), then nbval executes every cell.
_build/nbval/%.ipynb: notebooks/%.md | $(STAMP)
	@mkdir -p $(@D)
	$(VENV)/bin/jupytext --quiet --to ipynb --output $@.in.ipynb $<
	$(VENV)/bin/papermill --prepare-only -p scale smoke $@.in.ipynb $@ >/dev/null
	rm -f $@.in.ipynb

test-notebooks: $(STAMP) $(SMOKE)
	cd notebooks && ../$(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env \
	    $(addprefix ../,$(SMOKE))

# Builds a smoke-scale site in its own folder, then drives headless Chromium over it
# (the test skips, saying why, where no Chromium exists).  Screenshots: test-artifacts/.
test-browser: $(STAMP)
	$(MAKE) book SCALE=smoke BOOK_ROOT=_build/smoke
	BOOK_HTML=_build/smoke/_build/html $(PY) -m pytest -q -p no:cacheprovider tests/browser

# Every figure at the paper's statistics, one after the other, with the resumable cache in
# out/paper/cache; prints what each cost.  SKIP=fig2,fig6 leaves figures out (fig2 needs
# CIFAR-10 and, to finish in hours, a GPU).  A result worth keeping goes to
# results/ID_paper.nc (+ .png), which `make book SCALE=paper` then shows without recomputing.
paper: $(STAMP)
	$(PY) -m stochastic_transformers reproduce --all --scale paper --out out/paper \
	    $(if $(SKIP),--skip $(SKIP))

bench: $(STAMP)
	$(PY) benchmarks/bench_simulators.py

clean:
	rm -rf _build out .pytest_cache
