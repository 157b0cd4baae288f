"""The reserve panel: the all-time working set plus the hybrid reserve against the pool, with the same
"fits" as the working-set panel; what it needs when there is no model; its screenshots."""

from __future__ import annotations

import pytest

from kvset import quantities as fmt
from kvset.api import Reserve, WorkingSets
from kvset.geometry import load_model
from kvset.snapshot.builder import SnapshotConfig
from kvset_tui.widgets.reserve import NO_MODEL, ReservePanel
from tests.support.tui_snapshots import (
    ENGINE_MODEL,
    demo_snapshot,
    empty_snapshot,
    engine_snapshot,
    fed_snapshot,
    panel_app,
    screen_text,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


async def test_the_sum_against_the_pool_and_the_same_fits_as_the_working_set_row():
    snap = engine_snapshot()
    r = snap.get(Reserve)
    main_row = next(
        row for row in snap.get(WorkingSets).rows_for("all", snap.main_mode) if row.target == snap.main_target
    )
    assert r.fits is main_row.fits_pool is False  # one definition: the reserve panel and the table agree
    app = panel_app(ReservePanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert f"full-attention WS {fmt.target_label(r.working_set_target, 'coverage')}, all time" in text
    assert fmt.format_bytes(r.working_set_bytes, significant=fmt.SHORT_DIGITS) in text
    assert f"{r.total_bytes / r.pool_bytes:.0%} of pool does not fit" in text
    assert f"+ hybrid reserve ({r.concurrency} req, measured)" in text


async def test_a_short_screen_keeps_the_sum_and_the_verdict_on_two_lines():
    snap = engine_snapshot()
    r = snap.get(Reserve)
    app = panel_app(ReservePanel, snap)
    async with app.run_test(size=(80, 24)):
        lines = [line.rstrip() for line in screen_text(app).splitlines() if line.strip()]
    assert "WS 95% all + " in lines[1] and lines[2].endswith("no fit")
    assert f"{r.total_bytes / r.pool_bytes:.0%}" in lines[2]


async def test_without_a_model_it_says_to_give_one():
    app = panel_app(ReservePanel, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert NO_MODEL in screen_text(app)


async def test_a_model_before_any_access_has_no_data_yet():
    snap = fed_snapshot((), SnapshotConfig(geometry=load_model(ENGINE_MODEL)), ())
    app = panel_app(ReservePanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert "no data" in text and "not reached" not in text


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_reserve_screenshot(snap_compare, size):
    """Qwen3-Next on a 12,000-block pool: the working set and the reserve of 48 requests do not fit."""
    assert snap_compare(panel_app(ReservePanel, engine_snapshot()), terminal_size=size)


async def test_with_kv_cache_groups_in_the_events_the_panel_shows_what_each_group_measured():
    from dataclasses import replace

    from kvset.api import KvCacheGroups
    from kvset.figures.kv_cache_groups import GroupFigures
    from kvset.figures.working_sets import WorkingSetRow
    from kvset.types import KvCacheGroup

    snap = engine_snapshot()

    def measured(blocks: int) -> tuple[WorkingSetRow, ...]:
        return (WorkingSetRow(snap.main_target, snap.main_mode, "all", blocks, blocks * 16, None),)

    groups = KvCacheGroups(
        (
            GroupFigures(KvCacheGroup(0, "full_attention", None, 16, counted=True), 900, (), measured(4_321)),
            GroupFigures(KvCacheGroup(1, "sliding_window", 1024, 16), 300, (), measured(1_234)),
        )
    )
    app = panel_app(ReservePanel, replace(snap, results={**snap.results, KvCacheGroups: groups}))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert "group 0 full attention" in text and "4,321 blocks" in text
    assert "group 1 sliding window 1,024-token window" in text and "1,234 blocks" in text
    assert "measured per group" in text and "hybrid reserve" not in text  # no estimate where events say it


async def test_a_new_snapshot_with_the_same_reserve_is_not_redrawn():
    # the demo has no model: every snapshot says the same, so none after the first redraws it
    first = demo_snapshot(1)
    app = panel_app(ReservePanel, first)
    async with app.run_test(size=(120, 40)):
        panel = app.query_one(ReservePanel)
        renders = panel.renders
        assert not panel.show(demo_snapshot(2), panel.view)
        assert panel.renders == renders
        engine = engine_snapshot()  # a model: another picture
        assert panel.show(engine, panel.view) and panel.renders == renders + 1
        assert panel.snapshot is engine and "Reserve · " in str(panel.border_title)
