"""What a command line loads before it answers (issue 20, item 9): a version string, the help or a
completion script must not load the analysis (numba compiles and loads in about a second), and
`kvset --version` / `kvset --help` not numpy or the engines' clients either.

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


HEAVY = {"numba", "llvmlite", "httpx", "zmq", "textual", "dask"}


@pytest.mark.parametrize(
    ("module", "argv", "shows"),
    [
        ("kvset.cli", ["kvset", "--version"], "kvset 0."),
        ("kvset.cli", ["kvset", "--help"], "analyze"),
        ("kvset.cli", ["kvset", "completion", "bash"], "complete -o default -F"),
        ("kvset.cli", ["kvset", "analyze", "--help"], "--sample"),
        ("kvset.cli", ["kvset", "serve", "--help"], "--listen"),
        ("kvset_tui.cli", ["kvset-top", "--version"], "kvset-top 0."),
        ("kvset_tui.cli", ["kvset-top", "--help"], "--replay"),
        ("kvset_tui.cli", ["kvset-top", "--completion", "bash"], "complete -o default -F"),
    ],
)
def test_parsers_load_no_analysis(module: str, argv: list[str], shows: str) -> None:
    loaded, out = loaded_packages(module, argv)
    assert shows in out
    assert not loaded & HEAVY, f"{' '.join(argv)} loaded {sorted(loaded & HEAVY)}"


@pytest.mark.parametrize("argv", [["kvset", "--version"], ["kvset", "--help"]])
def test_version_and_help_load_not_even_numpy(argv: list[str]) -> None:
    loaded, _ = loaded_packages("kvset.cli", argv)
    assert "numpy" not in loaded


def test_analysing_loads_the_kernels() -> None:
    # the probe sees what an analysis loads: the same check would pass on a probe that saw nothing
    loaded, out = loaded_packages(
        "kvset.cli", ["kvset", "analyze", "--demo", "--demo-accesses", "2000", "--json"]
    )
    assert '"curve"' in out
    assert "numba" in loaded
