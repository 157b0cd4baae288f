"""The thrashing panel: its level and figures at the engine's pool in the chosen window, the engine's
measured hit rate beside the snapshot's prediction, and nothing judged without a capacity."""

from __future__ import annotations

import pytest

from kvset import quantities as fmt
from kvset.api import OperatingPoint, ThrashingByWindow
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.thrashing import ALL_TIME_ONLY, NO_REUSE, NOT_JUDGED, ThrashingPanel
from tests.support.tui_snapshots import (
    empty_snapshot,
    engine_snapshot,
    first_accesses_snapshot,
    misses_only_snapshot,
    panel_app,
    ranks_snapshot,
    replay_snapshot,
    screen_text,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("window", ["1m", "5m", "1h", "all"])
async def test_the_figures_are_the_snapshots_for_the_chosen_window(window):
    snap = engine_snapshot()
    t, op = snap.get(ThrashingByWindow).windows[window], snap.get(OperatingPoint)
    app = panel_app(ThrashingPanel, snap, ViewState(window=window))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
        assert str(app.panel.border_title) == f"Thrashing · {window} window"
        assert app.panel.has_class(f"-{t.level}")
    b = t.blocks
    assert f"+25 % cap {fmt.points(b.gain_25pct)} · {fmt.percent(b.restore_share)} re-stores" in text
    assert f"(engine pool) · block hit over {window} {fmt.percent(b.hit_rate)}" in text
    assert f"near misses {fmt.percent(b.near_miss_share)} of misses" in text
    # the engine's own rate beside the curve's prediction at its pool, in the same window
    assert (
        f"engine measured {fmt.percent(op.measured_token_hit_rate)} vs LRU {fmt.percent(op.lru(window))} "
        f"(tokens, {window})"
    ) in text


async def test_a_trace_without_a_capacity_is_not_judged_and_the_panel_says_what_to_give():
    snap = replay_snapshot()
    assert (
        snap.get(ThrashingByWindow).windows == {}
    )  # no engine pool, no --capacity: the builder judges nothing
    app = panel_app(ThrashingPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert NOT_JUDGED in text and "--capacity BLOCKS" in text
    assert "THRASHING" not in text and " OK " not in text


async def test_data_parallel_ranks_are_judged_at_each_ranks_own_pool_over_all_time():
    snap = ranks_snapshot()
    t = snap.get(ThrashingByWindow).windows["all"]
    app = panel_app(ThrashingPanel, snap, ViewState(window="all"))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert (
        f"at {t.capacity_blocks:,} blk (each rank's own pool) · block hit over all {fmt.percent(t.blocks.hit_rate)}"
        in text
    )
    app = panel_app(ThrashingPanel, snap, ViewState(window="5m"))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert ALL_TIME_ONLY in text


async def test_no_accesses_yet():
    app = panel_app(ThrashingPanel, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert "no block accesses yet" in screen_text(app)


async def test_misses_only_curve_is_labelled_not_compared_with_the_engine():
    app = panel_app(ThrashingPanel, misses_only_snapshot())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "misses only" in text
    assert "engine measured" not in text  # no comparison of a misses-only curve with the engine


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_thrashing_screenshot(snap_compare, size):
    """The engine's pool thrashes: the badge, the near misses, what more capacity buys."""
    assert snap_compare(panel_app(ThrashingPanel, engine_snapshot()), terminal_size=size)


async def test_in_token_units_the_panel_gives_the_token_figures():
    snap = engine_snapshot()
    t = snap.get(ThrashingByWindow).windows["5m"]
    assert t.tokens is not None  # its own values are tested in tests/unit/figures
    app = panel_app(ThrashingPanel, snap, ViewState(window="5m", unit="tokens"))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert f"token hit over 5m {fmt.percent(t.tokens.hit_rate)}" in text
    assert f"{fmt.percent(t.tokens.restore_share)} re-stores" in text


async def test_before_any_reuse_the_panel_says_so_and_gives_no_level():
    snap = first_accesses_snapshot()
    app = panel_app(ThrashingPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
        assert not any(app.panel.has_class(f"-{name}") for name in ("ok", "warn", "thrashing"))
    assert NO_REUSE in text and " OK " not in text
