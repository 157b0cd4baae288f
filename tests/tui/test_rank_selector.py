"""The rank selector: with data-parallel ranks, `r` cycles the curve and the working sets through the
merged stream and each rank's own cache, the titles and the status line say which, the working sets'
bottom line gives the pooling gain; without ranks the key is not offered. Screenshots at 80x24 and
120x40 with a rank selected."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from kvset import quantities as fmt
from kvset.api import Ranks
from kvset_tui.app import KvsetTopApp
from kvset_tui.curve_data import plot_data
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.curve_plot import HitRateCurvePlot
from kvset_tui.widgets.working_sets import WorkingSetTable
from tests.support.tui_snapshots import (
    RANK_POOL_BLOCKS,
    RANKS,
    engine_snapshot,
    fixed_clock,
    panel_app,
    ranks_snapshot,
    screen_text,
    wait_until,
)

pytestmark = pytest.mark.anyio


def make_app(snapshot) -> KvsetTopApp:
    return KvsetTopApp(snapshot=snapshot, clock=fixed_clock(), theme_name="dark")


def row_line(text: str, target: str) -> str:
    return next(line for line in text.splitlines() if target in line)


async def test_r_cycles_merged_then_each_rank_then_merged_again():
    snap = ranks_snapshot()
    app = make_app(snap)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        curve, table = app.query_one(HitRateCurvePlot), app.query_one(WorkingSetTable)
        seen = []
        for _ in range(RANKS + 1):
            seen.append((app.view.rank, str(curve.border_title).split(" · ")[0], str(table.border_title)))
            status = app.query_one("#status").render()
            assert f" · {seen[-1][1]} · " in str(status)
            await pilot.press("r")
        assert app.view.rank is None  # back to the merged stream
    assert [s[0] for s in seen] == [None, 0, 1, 2]
    assert [s[1] for s in seen] == ["merged", "rank 0", "rank 1", "rank 2"]
    assert seen[0][2] == "Working sets · merged · coverage · 5m window"
    assert seen[2][2] == "Working sets · rank 1 · coverage · all time"  # a rank's views are all-time only


async def test_a_rank_shows_its_own_curve_working_sets_and_pool():
    snap = ranks_snapshot()
    rank = snap.get(Ranks).view(1)
    view = ViewState(rank=1)
    d = plot_data(snap, view)
    merged = plot_data(snap, ViewState())
    assert d.window is None and merged.window is not None  # no windowed curve for a rank
    assert d.engine_capacity == RANK_POOL_BLOCKS and d.engine is None
    caps = [round(x) for x in d.all_time.x]
    assert d.all_time.y == pytest.approx([100 * r for r in rank.curve.hit_rates(caps)])
    assert d.all_time.y != pytest.approx(merged.all_time.y[: len(d.all_time.y)])
    app = panel_app(WorkingSetTable, snap, view)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
        subtitle = str(app.panel.border_subtitle)
    for row in rank.working_set_rows("coverage"):
        line = row_line(text, fmt.target_label(row.target, "coverage"))
        assert fmt.count(row.capacity_blocks) in line and "≤" not in line  # exact: the all-time curve
        assert line.rstrip(" │").endswith("yes" if row.capacity_blocks <= RANK_POOL_BLOCKS else "no")
    share = rank.accesses / snap.totals.accesses
    assert subtitle == f"{fmt.percent(share)} of accesses · own pool {fmt.count(RANK_POOL_BLOCKS)} blk"


async def test_the_merged_view_gives_the_pooling_gain_under_the_working_sets():
    snap = ranks_snapshot()
    p = snap.get(Ranks).pooling
    app = panel_app(WorkingSetTable, snap)
    async with app.run_test(size=(120, 40)):
        subtitle = str(app.panel.border_subtitle)
    assert p.capacity_blocks == RANKS * RANK_POOL_BLOCKS
    assert (
        subtitle
        == f"pooled {fmt.count(p.capacity_blocks)} blk: {fmt.points(p.gain('blocks'))} over {RANKS} rank pools"
    )


async def test_the_rank_key_is_in_the_footer_and_help_only_with_ranks():
    for snap, offered in ((ranks_snapshot(), True), (engine_snapshot(), False)):
        app = make_app(snap)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(
                pilot, lambda app=app: screen_text(app).splitlines()[-1].strip() != ""
            )  # footer painted
            footer = screen_text(app).splitlines()[-1]
            await pilot.press("r")
            rank_after_r = app.view.rank
            await pilot.press("question_mark")
            help_text = str(app.screen.query_one("#help-text", Static).render()).split("Panels")[0]
        binding = next(b for b in app.BINDINGS if b.id == "kvset.rank")
        assert ("r Rank" in footer) is offered
        assert (f" r  {binding.tooltip}" in help_text) is offered
        assert rank_after_r == (0 if offered else None)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_rank_selected_screenshot(snap_compare, size):
    """Three round-robin ranks of 3,000 blocks each, rank 1 selected: its own curve, working sets, pool."""
    assert snap_compare(make_app(ranks_snapshot()), press=["r", "r"], terminal_size=size)
