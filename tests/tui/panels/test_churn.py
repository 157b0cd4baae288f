"""The page-churn panel: the snapshot's per-second series with labels that say what each row is per
(a fine slot, a coarse slot, the data's clock), the engine's own history, and its screenshots."""

from __future__ import annotations

import numpy as np
import pytest

from kvset import quantities as fmt
from kvset.api import ChurnSeries, EngineState
from kvset.snapshot.builder import SnapshotConfig
from kvset.workload import AgenticWorkload, WorkloadConfig
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.churn import ChurnPanel, churn_rows
from tests.support.tui_snapshots import (
    demo_snapshot,
    empty_snapshot,
    engine_snapshot,
    fed_snapshot,
    metrics_only_snapshot,
    panel_app,
    replay_snapshot,
    screen_text,
    workload_batches,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


def last(values) -> float:
    finite = np.asarray(values, dtype=float)
    return float(finite[~np.isnan(finite)][-1])


def test_rows_show_the_snapshots_rates_per_second_and_say_what_they_are_per():
    snap = demo_snapshot()
    c = snap.get(ChurnSeries)
    rows = {r.label: r for r in churn_rows(snap, "blocks")}
    assert rows["accesses/s"].latest == fmt.rate(last(c.accesses))  # the snapshot's series are per second
    assert rows["re-refs/s"].latest == fmt.rate(last(c.rereferences))
    hit = rows[
        f"hit/1 s @ {fmt.count(snap.get(EngineState).pool_blocks)} blk"
    ]  # each 1 s slot's hit rate at the pool
    assert hit.latest == fmt.percent(last(c.hit_rate_at_capacity))
    ws = rows["slot WS 95% cov/1 min"]  # the working set of each 1-minute slot, not of a longer window
    assert ws.latest == f"{fmt.count(last(c.working_set_main))} blk"


def test_the_working_set_row_follows_the_snapshots_main_target():
    batches = list(workload_batches(AgenticWorkload(WorkloadConfig(seed=1)), 120.0))
    snap = fed_snapshot(
        batches, SnapshotConfig(options={"target_mode": "absolute", "absolute_targets": (0.6, 0.8)}), ()
    )
    assert [r.label for r in churn_rows(snap, "blocks")][-1] == "slot WS 60% abs/1 min"


def test_without_a_capacity_there_is_no_hit_rate_row():
    labels = [r.label for r in churn_rows(replay_snapshot(), "blocks")]
    assert not any(label.startswith("hit/") for label in labels) and "accesses/s" in labels


async def test_the_title_says_the_slot_the_clock_and_the_span():
    app = panel_app(ChurnPanel, demo_snapshot())
    async with app.run_test(size=(120, 40)):
        title = str(app.panel.border_title)
    # the demo plays its own (trace) clock: its rates are per second of trace time
    assert title == "Page churn · per 1 s slot of trace time, last 5 min · WS per 1 min slot"
    app = panel_app(ChurnPanel, engine_snapshot())  # a live engine: the wall clock
    async with app.run_test(size=(120, 40)):
        assert "of trace time" not in str(app.panel.border_title)


async def test_metrics_only_shows_the_engines_history():
    snap = metrics_only_snapshot()
    app = panel_app(ChurnPanel, snap)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
    latest = snap.get(EngineState).history[-1]
    assert (
        "Engine history" in text and "engine hit (tok)" in text and fmt.percent(latest.token_hit_rate) in text
    )
    assert "engine KV use" in text and fmt.percent(latest.kv_usage) in text


async def test_no_accesses_yet():
    app = panel_app(ChurnPanel, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert "no accesses yet" in screen_text(app)


async def test_a_short_screen_puts_two_sparklines_on_a_line():
    snap = engine_snapshot()
    app = panel_app(ChurnPanel, snap)
    async with app.run_test(size=(80, 24)):
        text = screen_text(app)
    assert "reref/s" in text and "re-refs/s" not in text
    assert len([line for line in text.splitlines() if " │ " in line]) >= 2


def test_churn_rows_in_tokens_convert_the_capacities():
    snap = engine_snapshot()
    rows = churn_rows(snap, "tokens")
    assert (
        rows[3].label == f"hit/1 s @ {fmt.count(snap.get(EngineState).pool_blocks * snap.block_tokens)} tok"
    )


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_churn_screenshot(snap_compare, size):
    """The engine: rates per 1 s slot, hit rate at its pool, the working set per minute, its own history."""
    assert snap_compare(panel_app(ChurnPanel, engine_snapshot(), ViewState()), terminal_size=size)
