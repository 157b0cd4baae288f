# The two commands the README promises: `make run` and `make test`.
# Both create the virtual environment on first use, so a fresh machine needs nothing else.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench validate-vllm clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kvset-top --demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m benchmarks

# kvset-top against vLLM 0.33.0's real scheduler (no GPU), at pools where 30-90 % of the blocks are
# pinned, full and incremental event modes; exit 1 when the prediction is over 2 points off in full
# mode. Not part of `make test`: the engine environment is about 5 GB (VLLM_VENV=path reuses one).
VLLM_VENV ?= .venv-vllm
VALIDATE_POOLS ?= 2000,3000,4000,5000,8000
validate-vllm: $(STAMP)
	VLLM_VENV=$(VLLM_VENV) benchmarks/vllm_engine/setup.sh
	$(VLLM_VENV)/bin/python benchmarks/vllm_engine/run.py --check --pools $(VALIDATE_POOLS) --modes full,incremental

clean:
	rm -rf $(VENV) build *.egg-info
