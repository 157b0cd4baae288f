"""The curve's cursor: ←/→ move it (an eighth of a doubling a step on a log axis), shift doubles or
halves, `c` types a capacity, Esc hides it; the curve's legend reads the shown curve there (hit rate
and what doubling adds), and without a known pool the Thrashing panel judges at the cursor."""

from __future__ import annotations

import pytest

from kvset.api import Curves, ThrashingByWindow
from kvset.api import quantities as fmt
from kvset.figures.thrashing import capacity_gain
from kvset_tui.capacity_prompt import CapacityPrompt, capacity_blocks
from kvset_tui.view_state import ViewState
from tests.support.tui_snapshots import engine_snapshot, replay_snapshot, screen_text
from tests.tui.test_app_snapshots import app_for

pytestmark = pytest.mark.anyio


def test_the_cursor_moves_by_eighths_of_a_doubling_and_stays_on_the_axis():
    v = ViewState().move_cursor(1, start=1_000, top=10_000)
    assert v.cursor_blocks == 1_000  # the first press shows it at the start
    for _ in range(8):
        v = v.move_cursor(1, start=1_000, top=10_000)
    assert v.cursor_blocks == pytest.approx(2_000, abs=8)
    assert v.move_cursor(-120, 1_000, 10_000).cursor_blocks == 1
    assert v.move_cursor(80, 1_000, 10_000).cursor_blocks == 10_000
    small = ViewState(cursor_blocks=2)
    assert small.move_cursor(1, 1, 100).cursor_blocks == 3  # at least a block a step
    linear = ViewState(log_x=False, cursor_blocks=1_000)
    assert linear.move_cursor(2, 1_000, 4_000).cursor_blocks == 1_200
    assert ViewState(cursor_blocks=5).with_cursor(None).cursor_blocks is None


def test_a_typed_capacity_reads_blocks_or_bytes_with_a_model():
    assert capacity_blocks("12000", None) == 12_000 and capacity_blocks("1.2e4", None) == 12_000
    with pytest.raises(ValueError, match="--model"):
        capacity_blocks("40GiB", replay_snapshot())
    snap = engine_snapshot()
    assert capacity_blocks("40GiB", snap) == 40 * 2**30 // snap.bytes_per_block
    with pytest.raises(ValueError):
        capacity_blocks("lots", None)


async def test_without_a_pool_the_cursor_reads_the_curve_and_thrashing_is_judged_there():
    snap = replay_snapshot()
    assert snap.get(ThrashingByWindow).get("5m") is None  # no pool: not judged
    app = app_for(snap, "dark")
    async with app.run_test(size=(120, 40)) as pilot:
        assert "not judged" in screen_text(app)
        await pilot.press("right")
        at = app.view.cursor_blocks
        assert at is not None
        curve = snap.get(Curves).curve(app.view.window)
        legend = str(app.query_one("#curve").border_subtitle)
        doubled = curve.hit_rate(2 * at) - curve.hit_rate(at)
        assert f"{fmt.percent(curve.hit_rate(at))} · ×2 {fmt.points(doubled)}" in legend
        text = screen_text(app)
        gain = capacity_gain(curve, at)
        assert "(the cursor: no pool known)" in text and f"+25 % cap {fmt.points(gain.gain_25pct)}" in text
        for _ in range(8):
            await pilot.press("right")
        assert app.view.cursor_blocks == pytest.approx(2 * at, rel=0.01)
        await pilot.press("shift+left")
        assert app.view.cursor_blocks == pytest.approx(at, rel=0.01)
        await pilot.press("escape")
        assert app.view.cursor_blocks is None and "not judged" in screen_text(app)


async def test_c_types_a_capacity_and_the_pool_still_rules_the_thrashing_panel():
    snap = engine_snapshot()
    app = app_for(snap, "dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        assert isinstance(app.screen, CapacityPrompt)
        await pilot.press(*"abc", "enter")
        assert isinstance(app.screen, CapacityPrompt)  # refused with a reason, the prompt stays
        await pilot.press(*["backspace"] * 3, *"5000", "enter")
        assert not isinstance(app.screen, CapacityPrompt) and app.view.cursor_blocks == 5_000
        assert "(engine pool)" in screen_text(app)  # a known pool is where thrashing is judged
