"""What a command line loads before it answers (issue 20, item 9): a version string, the help or a
completion script must not load the analysis: not numba (it compiles and loads in about a second),
not numpy (0.1 s idle, up to 0.6 s on a loaded machine: the figures' option declarations and the
flags' defaults once imported it), not the engines' clients, not the app.

Each case runs the real entry point in a fresh interpreter and reads sys.modules when it exits: an
import that slips back in at module level, anywhere below the parsers, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import atexit, json, sys
def report():
    sys.__stdout__.flush()
    sys.stderr.write("MODULES " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})) + "\\n")
atexit.register(report)
from ENTRY_MODULE import main
sys.argv = ENTRY_ARGV
raise SystemExit(main())
"""


def loaded_packages(module: str, argv: list[str]) -> tuple[set[str], str]:
    """The top-level packages `module`'s main had loaded when it exited on `argv`, and its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("ENTRY_MODULE", module).replace("ENTRY_ARGV", repr(argv))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES "))), done.stdout


HEAVY = {"numpy", "numba", "llvmlite", "httpx", "zmq", "prometheus_client", "textual", "dask"}


@pytest.mark.parametrize(
    ("module", "argv", "shows"),
    [
        ("kvset.cli", ["kvset", "--version"], "kvset 0."),
        ("kvset.cli", ["kvset", "--help"], "analyze"),
        ("kvset.cli", ["kvset", "completion", "bash"], "complete -o default -F"),
        ("kvset.cli", ["kvset", "analyze", "--help"], "--sample"),
        ("kvset.cli", ["kvset", "serve", "--help"], "--listen"),
        ("kvset.cli", ["kvset", "verify", "--help"], "--opt"),
        ("kvset.cli", ["kvset", "record", "--help"], "--out"),
        ("kvset.cli", ["kvset", "model", "--help"], "--kv-dtype"),
        ("kvset_tui.cli", ["kvset-top", "--version"], "kvset-top 0."),
        ("kvset_tui.cli", ["kvset-top", "--help"], "--replay"),
        ("kvset_tui.cli", ["kvset-top", "--completion", "bash"], "complete -o default -F"),
    ],
)
def test_parsers_load_no_analysis(module: str, argv: list[str], shows: str) -> None:
    loaded, out = loaded_packages(module, argv)
    assert shows in out
    assert not loaded & HEAVY, f"{' '.join(argv)} loaded {sorted(loaded & HEAVY)}"


def test_analysing_loads_the_kernels() -> None:
    # the probe sees what an analysis loads: the same check would pass on a probe that saw nothing
    loaded, out = loaded_packages(
        "kvset.cli", ["kvset", "analyze", "--demo", "--demo-accesses", "2000", "--json"]
    )
    assert '"curve"' in out
    assert {"numba", "numpy"} <= loaded


def test_the_curve_class_through_the_api_loads_numpy_on_first_use() -> None:
    # kvset.api gives the curve's class (the one name of it that loads numpy) on first use: still the class
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kvset.api as api; before = 'numpy' in sys.modules; "
            "from kvset.core.curve import HitRateCurve; print(before, api.HitRateCurve is HitRateCurve)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["False", "True"], done.stderr
