# Side by Side: PyTorch and JAX. `make` does everything; `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := all

# Profile: auto picks gpu where PyTorch or JAX sees a CUDA device, else cpu.
PROFILE ?= auto
# ONLY=slug[,slug]: restrict to some notebooks. FORCE=1: run even if cached or frozen.
ONLY ?=
FORCE ?=
# SETUP=0 with PYTHON=python3: use a machine's own Python and skip set-up (air-gapped GPU boxes).
SETUP ?= 1
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
# SITE: where posts, images and results are written (tests use a temporary one).
SITE ?= .
# GPU=1: set-up adds CUDA builds of PyTorch and JAX (requirements-gpu-cudaNN.txt); GPU=0: it does not.
# Default: 1 where nvidia-smi lists a GPU. CUDA_MAJOR (12 or 13): the driver's, from nvidia-smi.
ifeq ($(origin GPU),undefined)
GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo 1 || echo 0)
endif
CUDA_MAJOR ?= $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
APT_PACKAGES := jekyll jekyll-theme-minima ruby-jekyll-feed ruby-jekyll-seo-tag bundler graphviz \
                dataset-fashion-mnist chromium g++ bubblewrap
# The site's math engine: a current KaTeX release from the npm registry, pinned with its registry integrity
# (npm view katex@VERSION dist.integrity). Debian's libjs-katex (0.16.4) does not count \\edef expansions.
KATEX_VERSION := 0.19.1
KATEX_INTEGRITY := sha512-jG8uKntjSEcm2EpQOh0XturpPuuC9r3Sq5HLHdsFdWZT27E672SF19QEi+of0/YeOy15lDgRhKvr5614uRrEfA==

ifeq ($(SETUP),1)
SETUP_DEPS := setup
else
SETUP_DEPS :=
# The machine's own Python has no editable install of the library: import it from src/.
export PYTHONPATH := $(CURDIR)/src$(if $(PYTHONPATH),:$(PYTHONPATH))
endif

PUBLISH := $(PYTHON) -m sidebyside.publish
SELECT := $(if $(ONLY),--only $(ONLY)) --site $(SITE)

.PHONY: all help setup apt venv native gpu bundle assets readme sync check-pairs lint execute render list recover site serve test test-fast offline box-check clean clean-caches

## all: set up, run every notebook with the profile this machine supports, render, build the site
all: $(SETUP_DEPS) execute site

## help: list the targets
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

## setup: Debian packages, the Python venv (with CUDA builds where a GPU is seen), the gems, the site's local assets (idempotent)
# The Debian packages, the Python stack and KaTeX come from three registries and need nothing of each other: they
# install side by side (each target's output printed whole when it ends). The gems need Debian's ruby; grid_sample's
# kernel needs g++ and the venv.
setup:
	@$(MAKE) --no-print-directory -j3 -Otarget apt venv assets
	@$(MAKE) --no-print-directory $(if $(filter 1,$(GPU)),gpu) bundle native

## native: build grid_sample's CPU kernel (g++) into its cache, as its first use would (once per venv install)
native: $(VENV)/.native

$(VENV)/.native: $(VENV)/.installed
	$(VENV)/bin/python -m sidebyside.grid_sample.native
	@touch $@

## apt: install the Debian packages that are missing (as root; otherwise print the command)
apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing Debian packages; run:  sudo apt-get install -y $$(echo $$missing)" >&2; exit 1; \
	  fi; \
	fi

## venv: create .venv from the pinned requirements.txt and install the library (editable)
venv: $(VENV)/.installed

# uv installs the pinned stack (18 s, against pip's 56 s, into a new venv on this project's 2-core machines, the
# same packages to the version), taking pip's local wheel folders (PIP_FIND_LINKS and pip's find-links setting) as
# pip would. The stack is byte-compiled once here, on every core. Where PYTHONDONTWRITEBYTECODE is set (this
# project's machines) nothing else writes .pyc files: without these every process would compile torch again as it
# imports it (the tests took 1,324 s so, against 960 s with them, on the same host within the hour). The packages'
# own test suites are left out (a fifth of the files; nothing imports them). A file that does not compile (a
# template, Python 2 example code) is left as it is, as pip leaves it.
UV_VERSION := 0.13.9
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q uv==$(UV_VERSION)
	links="$(PIP_FIND_LINKS) $$($(VENV)/bin/python -m pip config get global.find-links 2>/dev/null)"; \
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python $$(for l in $$links; do echo --find-links $$l; done) -r requirements.txt
	$(VENV)/bin/python -c "import compileall, re, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], \
	rx=re.compile('/tests?/'), quiet=2, workers=0)"
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python --no-deps -e .
	@touch $@

## gpu: add CUDA builds of PyTorch and JAX to .venv for the driver's CUDA major, then check both see the GPU (GPU=1)
gpu: $(VENV)/.installed-gpu

$(VENV)/.installed-gpu: $(VENV)/.installed $(wildcard requirements-gpu-cuda*.txt)
	@case "$(CUDA_MAJOR)" in 12|13) ;; *) echo "GPU set-up: no CUDA version from the driver (nvidia-smi says '$(CUDA_MAJOR)'); \
	the pinned JAX has builds for CUDA 12 and 13. Install or update the NVIDIA driver, pass CUDA_MAJOR=12|13, or GPU=0." >&2; exit 1;; esac
	$(VENV)/bin/python -m pip install -q -r requirements-gpu-cuda$(CUDA_MAJOR).txt
	@if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then \
	  $(VENV)/bin/python -c "from sidebyside.run import provenance as p; print('GPU set-up: PyTorch and JAX both compute on', p.check_gpu_profile(p.devices()))" || exit 1; \
	else echo "GPU set-up: CUDA $(CUDA_MAJOR) builds installed; no GPU visible here to check them on"; fi
	@touch $@

## bundle: resolve the Gemfile offline against Debian's gems (Gemfile.lock is local: Debian's gem versions move)
bundle:
	@bundle check >/dev/null 2>&1 || { rm -f Gemfile.lock; bundle check; }

## assets: KaTeX $(KATEX_VERSION) from the npm registry (integrity checked) into assets/vendor/katex, so math renders without network
assets:
	@if [ "$$(cat assets/vendor/katex/VERSION 2>/dev/null)" != "$(KATEX_VERSION)" ]; then \
	  command -v npm >/dev/null || { echo "assets: npm is needed to fetch KaTeX $(KATEX_VERSION); install Node.js with npm (Debian: apt-get install npm)" >&2; exit 1; }; \
	  set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  tarball=$$(cd "$$tmp" && npm pack --silent katex@$(KATEX_VERSION)); \
	  got="sha512-$$(openssl dgst -sha512 -binary "$$tmp/$$tarball" | base64 -w0)"; \
	  if [ "$$got" != "$(KATEX_INTEGRITY)" ]; then echo "assets: katex@$(KATEX_VERSION) from the registry has integrity $$got, \
	  not the pinned $(KATEX_INTEGRITY); nothing was installed" >&2; exit 1; fi; \
	  tar -xzf "$$tmp/$$tarball" -C "$$tmp"; \
	  rm -rf assets/vendor/katex && mkdir -p assets/vendor && cp -r "$$tmp/package/dist" assets/vendor/katex; \
	  echo "$(KATEX_VERSION)" > assets/vendor/katex/VERSION; \
	  echo "assets: KaTeX $(KATEX_VERSION) in assets/vendor/katex"; \
	fi

## readme: write the README's table of posts from the notebooks' headers
readme: $(SETUP_DEPS)
	$(PUBLISH) readme

## sync: update each notebooks/*.ipynb from its .py source (jupytext pairs, no outputs)
sync: $(SETUP_DEPS)
	$(VENV)/bin/jupytext --sync notebooks/*.py

## check-pairs: fail if a .ipynb pair is missing, stale or holds outputs
check-pairs: $(SETUP_DEPS)
	$(PUBLISH) check-pairs

## lint: ruff (configured in pyproject.toml) over the library, tests, notebook sources and tools; the pair check; actionlint over .github/workflows
lint: $(SETUP_DEPS)
	$(PYTHON) -m ruff check src tests notebooks tools
	$(PUBLISH) check-pairs
	@al=$$(command -v $(dir $(PYTHON))actionlint || command -v actionlint) && $$al || { [ -z "$$al" ] && echo "lint: \
	.github/workflows not checked: no actionlint; $(PYTHON) -m pip install -r requirements-lint.txt (pinned; its build \
	downloads actionlint's binary from GitHub)" >&2; }

## execute: run the notebooks that changed with PROFILE=auto|smoke|cpu|gpu [ONLY=slug] [FORCE=1], and publish them
execute: $(SETUP_DEPS)
	$(PUBLISH) execute --profile $(PROFILE) $(SELECT) $(if $(filter 1,$(FORCE)),--force,$(if $(filter-out 0,$(FORCE)),$(error FORCE=$(FORCE) is neither 1 (replace cached or larger-profile results) nor 0 or empty (keep them))))

## render: render posts again from build/executed (after a template change), without executing
render: $(SETUP_DEPS)
	$(PUBLISH) render $(SELECT)

## list: the notebooks, their slugs and what is published
list: $(SETUP_DEPS)
	$(PUBLISH) list $(SELECT)

## reproduce: re-run ONLY=slug here into build/reproduce/ and compare its speed verdicts with the published ones
.PHONY: reproduce
reproduce: $(SETUP_DEPS)
	$(if $(ONLY),,$(error reproduce needs the post: make reproduce ONLY=<slug> (make list shows the slugs)))
	$(PUBLISH) reproduce --only $(ONLY) $(if $(filter-out auto,$(PROFILE)),--profile $(PROFILE))

## aa: race every timed contestant of ONLY=slug against itself (A/A) into build/aa/ and count the verdicts that find a winner
.PHONY: aa
aa: $(SETUP_DEPS)
	$(if $(ONLY),,$(error aa needs the post: make aa ONLY=<slug> (make list shows the slugs)))
	$(PUBLISH) aa --only $(ONLY) $(if $(filter-out auto,$(PROFILE)),--profile $(PROFILE))

## recover: finish or roll back a publication that was interrupted (execute and render do it first too)
recover: $(SETUP_DEPS)
	$(PUBLISH) recover --site $(SITE)

## site: build the blog into _site/ (strict front matter)
site: $(SETUP_DEPS)
	@# names a corrupt results file (rather than Jekyll's bare YAML error), an unfinished publication or a post
	@# with files missing (and fails), and refreshes the scoreboard's states
	@$(PUBLISH) list --site . --freshness >/dev/null
	bundle exec jekyll build --strict_front_matter --quiet

## serve: serve the blog at http://127.0.0.1:4000
serve: $(SETUP_DEPS)
	@$(PUBLISH) list --site . >/dev/null
	bundle exec jekyll serve --strict_front_matter

# The tests start hundreds of Python processes (notebook kernels, timing workers, the publisher's runs) that import
# this checkout's modules. Where PYTHONDONTWRITEBYTECODE is set, as on this project's machines, each compiles them
# again; the tests let Python keep what it compiled (in __pycache__/, which git ignores): make test-fast took 79 s
# against 91 s so, back to back.
test test-fast: export PYTHONDONTWRITEBYTECODE =

## test: set up, lint, then run every test (unit, parity, publisher, cache, smoke notebooks, site, browser), a file per worker on every core
# JOBS: pytest-xdist workers (default 2). Three on 2 cores were slower: 1,088 s of tests against 960 s for two,
# back to back on one tree.
test: $(SETUP_DEPS) lint
	$(PYTHON) -m pytest tests -n $(or $(JOBS),2) --dist loadfile --no-loadscope-reorder

## test-fast: the tests that execute no notebook, start no browser, compile no whole training step and take no seconds alone, on every core (48 s to 73 s on 2 cores, set up, as the host varies; the first run after a clone compiles JAX cold, about 20 s more)
test-fast: $(SETUP_DEPS)
	$(PYTHON) -m pytest tests -m "not slow" -n $(or $(JOBS),2) --dist loadfile --no-loadscope-reorder

## offline: prepare what an air-gapped GPU box lacks into .offline/ for the call's posts (SLUGS=slug,slug; default every GPU post; PYVER=3.12): the wheels, FashionMNIST only where a post reads it; refuses over 48 MiB carried
offline:
	SLUGS='$(SLUGS)' PYTHON='$(PYTHON)' bash tools/prepare-offline.sh $(or $(PYVER),3.12)

## box-check: rehearse a box call here: a venv like the box's (Python 3.12, torch 2.11, JAX 0.11.2, from PyPI: about 3 GB the first time), .offline/ installed as tools/device-run.sh does, every GPU post (SLUGS=) executed at smoke sizes through it; result in build/box-check/result.txt. Not part of make test
box-check:
	SLUGS='$(SLUGS)' PYTHON='$(PYTHON)' bash tools/box-check.sh

## clean: remove build outputs (never the published posts)
clean:
	rm -rf build _site .jekyll-cache

## clean-caches: empty the compile caches (grid_sample's native kernels, rebuilt on first use; a kept SIDEBYSIDE_COMPILE_CACHE; the tests' JAX cache) and killed runs' temporary ones; every run caps each at SIDEBYSIDE_CACHE_CAP_GB (default 4), least recently used out first
clean-caches:
	$(PUBLISH).footprint clean
