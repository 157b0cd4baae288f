"""`kvset analyze --json` and `kvset-top --once --json` print one schema: the same keys in the same
order, the same figures for the same trace, every key documented in the README."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from kvset.cli import argtypes, main
from kvset.cli.figure_flags import command_options
from kvset.figures import FIGURES
from kvset.figures.base import ANALYZE, SERVE, TOP
from kvset_tui.cli import main as top_main
from tests.support.paths import MOONCAKE_TRACE, ROOT

TRACE = str(MOONCAKE_TRACE)
FLAGS = ("--model", "llama-3.1-70b", "--tiers", "5000,20000", "--size-next-tier", "0.95", "--opt")


@pytest.fixture(scope="module")
def reports() -> tuple[dict, dict]:
    return _json_of(main, ["analyze", TRACE, "--json", *FLAGS]), _json_of(
        top_main, ["--once", "--json", "--replay", TRACE, *FLAGS]
    )


def _json_of(command, argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert command(argv) == 0
    return json.loads(out.getvalue())


def test_analyze_and_once_have_the_same_keys_in_the_same_order(reports):
    offline, live = reports
    assert list(offline) == list(live)
    assert offline["input"] == TRACE and live["input"] is None  # what differs is what was read, and how
    assert offline["sources"] == [] and [s["kind"] for s in live["sources"]] == ["replay"]


@pytest.mark.parametrize(
    "key",
    [
        "accesses",
        "distinct_blocks",
        "requests",
        "block_tokens",
        "bytes_per_block",
        "curve",
        "knee",
        "attainable_hit_rate",
        "infinite_cache_hit_rate",
        "max_stack_distance",
        "tiers",
        "next_tier",
        "model",
        "hybrid_reserve_bytes",
    ],
)
def test_the_figures_of_one_trace_are_the_same_whichever_command_computed_them(reports, key):
    offline, live = reports
    assert offline[key] == live[key]


def test_the_policy_gap_is_the_same_for_the_targets_both_have(reports):
    offline, live = reports
    coverage = [g for g in live["policy_gap"]["working_sets"] if g["mode"] == "coverage"]
    assert offline["policy_gap"]["working_sets"] == coverage  # the live monitor has absolute targets too
    assert offline["policy_gap"]["hit_rates"] == live["policy_gap"]["hit_rates"]


def test_the_all_time_working_sets_are_the_same_rows(reports):
    def rows(report: dict) -> list[dict]:
        keep = ("target", "capacity_blocks", "capacity_tokens", "capacity_bytes", "opt_capacity_blocks")
        return [
            {k: w[k] for k in keep}
            for w in report["working_sets"]
            if w["window"] == "all" and w["mode"] == "coverage"
        ]

    offline, live = reports
    assert rows(offline) == rows(live) and len(rows(offline)) == 3


def test_every_key_is_documented_in_the_readme(reports):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## JSON\n") : readme.index("## The library\n")]
    documented = set(re.findall(r"`(\w+)`", section))
    offline, _ = reports
    assert set(offline) <= documented, sorted(set(offline) - documented)


def test_no_two_figures_write_one_key():
    keys = [k for figure in FIGURES for k in figure.keys]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("command", [ANALYZE, TOP, SERVE])
def test_every_figure_option_names_a_value_type_that_exists(command):
    for option in command_options(command):
        assert option.argtype is None or callable(getattr(argtypes, option.argtype, None)), option.flag
