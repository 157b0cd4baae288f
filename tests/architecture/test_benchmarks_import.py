"""The benchmarks are code the suite does not run: each of them must at least still import, so that a
renamed function in kvset breaks `make test` instead of the next `make bench` (the engine harnesses
under benchmarks/vllm_engine and benchmarks/sglang_engine import their engine and are left out)."""

import subprocess
import sys

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


def test_every_benchmark_module_imports():
    names = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert "run" in names and "distributed" in names  # the glob found the folder
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module('benchmarks.' + n)\n"
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]
