# The two commands the README promises: `make run` and `make test`.
# Both create the virtual environment on first use, so a fresh machine needs nothing else.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench clean

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

clean:
	rm -rf $(VENV) build *.egg-info
