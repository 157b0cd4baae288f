# The two commands the README promises: `make run` and `make test`.
# Both create the virtual environment on first use, so a fresh machine needs nothing else.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint bench bench-startup bench-large bench-dask bench-flood bench-scrape validate-vllm validate-vllm-tenants validate-sglang clean

# uv installs the project and its tools about five times faster than pip on a fresh machine (about 15 s
# against 90 s; the same releases), so it does; pip stays the fallback where uv cannot be had.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv && $(VENV)/bin/uv pip install -q --python $(PY) -e '.[dev,dask]' \
		|| $(PY) -m pip install -q -e '.[dev,dask]'
	@echo "compiling the kernels (first run only, about 10 to 30 s)..."
	$(VENV)/bin/kvset-top --once --demo > /dev/null
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/kvset-top --demo

# The kernels are compiled once before any test process starts (tests/support/compile_kernels.py:
# otherwise each worker compiles its own copy on a fresh clone), in three processes, beside mypy:
# four single-threaded jobs of about equal length on the two cores. `import kvset.core` first settles
# the compiled caches' stamp (kvset.core.jit_cache), so no two of them both drop the caches. The
# end-to-end group (-m slow: tests/e2e, real processes, sockets and terminals) runs in a process of
# its own beside the rest, which yields the CPU to it (nice), so that the group's timed processes are
# not starved. The rest runs on three workers, one more than the cores: most of its time is spent
# waiting (on the processes, sockets and timeouts it tests), and work stealing keeps the three busy
# to the end. The end-to-end group's report follows the rest's.
test: $(STAMP)
	$(PY) -c "import kvset.core"
	$(PY) -m tests.support.compile_kernels analysis & a=$$!; \
	$(PY) -m tests.support.compile_kernels min & o=$$!; \
	$(PY) -m tests.support.compile_kernels commands & c=$$!; \
	$(VENV)/bin/mypy & m=$$!; \
	wait $$a; a=$$?; wait $$o; o=$$?; wait $$c; c=$$?; wait $$m; m=$$?; \
	test $$a -eq 0 && test $$o -eq 0 && test $$c -eq 0 && test $$m -eq 0
	$(PY) -m pytest -q -m slow -p no:cacheprovider tests/e2e > .pytest-slow.log 2>&1 & slow=$$!; \
	nice -n 10 $(PY) -m pytest -q -n 3 --dist worksteal -m "not slow"; rest=$$?; \
	wait $$slow; slow=$$?; echo "-- the end-to-end group (pytest -m slow):"; cat .pytest-slow.log; \
	rm -f .pytest-slow.log; test $$rest -eq 0 && test $$slow -eq 0
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m benchmarks

# Time to the first useful screen: the command lines' start-up (--version, --help, completion), the
# kernels' compile at setup, and kvset-top --demo's first curve with and without it (about 2 min, tmux).
bench-startup: $(STAMP)
	$(PY) -m benchmarks.startup

# A 80M-access agentic trace (generated once into benchmarks/data/, about 1.1 GB): gzip -dc, the
# reader, the analyzer and `kvset analyze` end to end side by side, and a textbook C baseline.
bench-large: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m benchmarks.large

# The distributed analysis (kvset analyze --workers) on bench-large's 80M-access trace, read without gzip
# (0.7 GB more in benchmarks/data/): one process against 1 and 2 Dask workers (best of 2), the merge's
# cost against the horizon and the partitions (about 2 min once the trace is made). Not part of `make test`.
bench-dask: $(STAMP)
	$(PY) -m benchmarks.distributed --repeat 2

# A KV-event flood against a replay endpoint that never answers (issue 25): 10,000-block batches at
# 100 messages/s, every second one left out; the longest stall of kvset_accesses_total, the accesses
# counted and the RSS of `kvset serve` (about 1 min). FLOOD_ARGS passes options (--rate, --seconds).
bench-flood: $(STAMP)
	$(PY) -m benchmarks.kv_events_flood $(FLOOD_ARGS)

# 50 parallel scrapers of `kvset serve --demo`'s /metrics for 60 s (issue 20): scrapes not answered 200,
# the latency's median, 99th percentile and maximum, and those over 1 s (about 70 s). SCRAPE_ARGS passes
# options (--scrapers, --seconds, --idle N: idle connections held open meanwhile).
bench-scrape: $(STAMP)
	$(PY) -m benchmarks.scrape_load $(SCRAPE_ARGS)

# The real engine: vLLM 0.33.0's scheduler, KV cache manager and publisher, without a GPU (about 20 min,
# 3.2 GB of engine venv). Not part of `make test`. VALIDATE_ARGS passes options to run.py.
VLLM_VENV ?= .venv-vllm
validate-vllm: $(STAMP)
	VLLM_VENV=$(VLLM_VENV) benchmarks/vllm_engine/setup.sh
	$(VLLM_VENV)/bin/python benchmarks/vllm_engine/run.py --kvset-python $(PY) --check $(VALIDATE_ARGS)

# Issue 22: the same engine on several tenants (cache_salt, session_id; one floods) at one pool: each
# tenant's hit rate as vLLM's scheduler gave it against kvset-top --by tenant's prediction (about 2 min;
# --check: within 2 points for every tenant with 5 % of the traffic, the flood named the top displacer).
# TENANTS_ARGS passes options to tenants_run.py (--pool, --tenants, --steps-per-second, --offline).
validate-vllm-tenants: $(STAMP)
	VLLM_VENV=$(VLLM_VENV) benchmarks/vllm_engine/setup.sh
	$(VLLM_VENV)/bin/python benchmarks/vllm_engine/tenants_run.py --kvset-python $(PY) --check $(TENANTS_ARGS)

# The real SGLang: 0.5.23's RadixCache, paged allocator and ZMQ publisher on CPU tensors, at 6 pool
# sizes under lru, priority and lfu (15 to 30 minutes; the venv about 11 GB; --check: lru within 2
# points at every pool). Not part of `make test`.
SGLANG_VENV ?= .venv-sglang
validate-sglang: $(STAMP)
	SGLANG_VENV=$(SGLANG_VENV) benchmarks/sglang_engine/setup.sh
	$(SGLANG_VENV)/bin/python benchmarks/sglang_engine/run.py --sglang-python $(SGLANG_VENV)/bin/python \
		--kvset-python $(PY) --check $(VALIDATE_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
