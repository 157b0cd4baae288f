"""A number too large for the analysis is a one-line usage error where it is read, never an overflow
deep in the analysis: whole numbers beyond numpy's int64 range, capacities and byte sizes read as
infinity, durations longer than a year."""

from __future__ import annotations

import pytest

from kvset.cli import main as kvset_main
from kvset.quantities import MAX_COUNT
from kvset_tui.cli import main as top_main

HUGE = "9" * 30


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["analyze", "--demo", "--horizon", HUGE], "--horizon"),
        (["analyze", "--demo", "--seed", HUGE, "--sample", "0.1"], "--seed"),
        (["analyze", "--demo", "--bytes-per-token", HUGE], "--bytes-per-token"),
        (["analyze", "--demo", "--capacity", HUGE, "--opt"], "--capacity"),
        (["verify", "--demo", "--demo-accesses", HUGE], "--demo-accesses"),
    ],
)
def test_whole_numbers_beyond_int64_are_usage_errors(capsys, argv, names):
    with pytest.raises(SystemExit) as done:
        kvset_main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1
    assert names in err and "too large" in err and f"{MAX_COUNT:,}" in err


@pytest.mark.parametrize("capacities", [HUGE, "1e400", "100," + HUGE])
def test_capacities_beyond_int64_are_one_line(capsys, capacities):
    code = kvset_main(["analyze", "--demo", "--demo-accesses", "1000", "--capacities", capacities])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "capacity" in err


def test_durations_longer_than_a_year_are_usage_errors(capsys):
    for flag in ("--metrics-timeout", "--duration", "--interval"):
        with pytest.raises(SystemExit) as done:
            top_main(["--demo", "--once", flag, "1e20"])
        err = capsys.readouterr().err
        assert done.value.code == 2 and err.count("\n") == 1 and flag in err and "a year" in err


def test_the_largest_whole_number_is_still_taken(capsys):
    code = kvset_main(["analyze", "--demo", "--demo-accesses", "1000", "--horizon", str(MAX_COUNT), "--json"])
    assert code == 0, capsys.readouterr().err
