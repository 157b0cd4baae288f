"""The working-set panel: one row per target in the chosen window, what "fits" compared (the
snapshot's one definition), "no data" before any access, and how it looks at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from kvset import quantities as fmt
from kvset.api import FITS_WITH_RESERVE, FITS_WORKING_SET, BeladyMin, WorkingSets
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.working_sets import NO_REUSE, OPT_ALL_TIME, WorkingSetTable
from tests.support.tui_snapshots import (
    ENGINE_POOL_BLOCKS,
    demo_snapshot,
    empty_snapshot,
    engine_snapshot,
    first_accesses_snapshot,
    gpus_snapshot,
    mooncake_opt_snapshot,
    panel_app,
    replay_snapshot,
    screen_text,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


def row_line(text: str, target: str) -> str:
    return next(line for line in text.splitlines() if target in line)


async def test_fits_adds_the_hybrid_reserve_and_says_so():
    """The row that fits the pool in blocks but not with the reserve its requests need says "no",
    as the reserve panel does, and the line under the table names what was compared."""
    snap = engine_snapshot()
    row = next(r for r in snap.get(WorkingSets).rows_for("5m", "absolute") if r.target == 0.7)
    assert row.capacity_blocks <= ENGINE_POOL_BLOCKS and row.fits_pool is False and row.fits_counts_reserve
    app = panel_app(WorkingSetTable, snap, ViewState(target_mode="absolute"))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert row_line(text, "70 % abs").rstrip(" │").endswith("no")
    assert f"fits: {FITS_WITH_RESERVE}" in text


async def test_without_a_model_fits_compares_blocks_with_the_pool():
    snap = demo_snapshot()
    app = panel_app(WorkingSetTable, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert f"fits: {FITS_WORKING_SET}" in text
    for row in snap.get(WorkingSets).rows_for("5m", "coverage"):
        cell = "yes" if row.fits_pool else "no"
        assert row_line(text, fmt.target_label(row.target, "coverage")).rstrip(" │").endswith(cell)


async def test_without_a_pool_nothing_is_judged_to_fit():
    app = panel_app(WorkingSetTable, replay_snapshot())
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert "fits:" not in text
    assert row_line(text, "95 % cov").rstrip(" │").endswith("–")


async def test_before_any_access_the_rows_say_no_data_not_not_reached():
    app = panel_app(WorkingSetTable, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        text = screen_text(app)
    assert text.count("no data") == 3 and "not reached" not in text


async def test_the_title_names_the_window_and_target_set_and_the_rows_follow_it():
    snap = engine_snapshot()
    app = panel_app(WorkingSetTable, snap)
    async with app.run_test(size=(120, 40)) as pilot:
        for window in ("1m", "1h", "all"):
            app.set_view(ViewState(window=window))
            await pilot.pause()
            assert f"coverage · {window} window" in str(app.panel.border_title)
            row = snap.get(WorkingSets).rows_for(window, "coverage")[0]
            bound = "" if row.exact else "≤"
            assert f"{bound}{fmt.count(row.capacity_blocks)}" in row_line(screen_text(app), "95 % cov")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_working_sets_screenshot(snap_compare, size):
    """The engine with a model: blocks, tokens, GiB, trends, fits (with the reserve)."""
    assert snap_compare(panel_app(WorkingSetTable, engine_snapshot()), terminal_size=size)


# -- in GPUs (--gpu H100 --tp 4 --weights 160GB) ---------------------------------------------------
async def test_with_a_gpu_each_row_is_also_in_gpus_and_the_note_says_it_is_a_model():
    snap = gpus_snapshot()
    ws = snap.get(WorkingSets)
    app = panel_app(WorkingSetTable, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    header = row_line(text, "target").split()
    assert header.index("GiB") + 1 == header.index("GPUs")
    for row in ws.rows_for("5m", "coverage"):
        cells = row_line(text, fmt.target_label(row.target, "coverage")).split()
        bound = "" if row.exact else "≤"
        assert cells[header.index("GPUs") + 2] == bound + fmt.format_gpus(row.gpus, with_unit=False)
    # the engine's 2 KV heads over 4 GPUs: every token's KV is held twice, and the note says so
    assert "GPUs (a model): H100, " in text and "of KV each, KV held 2x at --tp 4" in text


async def test_where_the_gpus_do_not_fit_beside_the_tokens_they_take_their_place():
    # the app's panel at 120x40 is about this wide
    app = panel_app(WorkingSetTable, gpus_snapshot())
    async with app.run_test(size=(54, 24)):
        header = row_line(screen_text(app), "target").split()
    assert "tokens" not in header and header[header.index("GiB") + 1] == "GPUs"


async def test_without_a_gpu_there_is_no_gpus_column():
    app = panel_app(WorkingSetTable, engine_snapshot())
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert "GPUs" not in text


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_working_sets_in_gpus_screenshot(snap_compare, size):
    """The engine with a model counted in H100s at --tp 4: the GPUs column and what it assumed."""
    assert snap_compare(panel_app(WorkingSetTable, gpus_snapshot()), terminal_size=size)


# -- Belady MIN (--opt) ----------------------------------------------------------------------------
async def test_min_column_beside_lru_and_the_gap_at_the_chosen_capacity():
    snap = mooncake_opt_snapshot()
    rows = snap.get(WorkingSets).rows_for("all", "coverage")
    assert all(r.opt_capacity_blocks <= r.capacity_blocks for r in rows)
    at = snap.get(BeladyMin).gap.at_capacity()
    gap = f"MIN {fmt.percent(at.opt_block_hit_rate)} · LRU {fmt.percent(at.lru_block_hit_rate)}"
    app = panel_app(WorkingSetTable, snap, ViewState(window="all"))
    async with app.run_test(size=(120, 40)) as pilot:
        text = screen_text(app)
        header = row_line(text, "target")
        assert header.index("blocks") < header.index("MIN") < header.index("trend")
        for r in rows:
            cells = row_line(text, fmt.target_label(r.target, "coverage")).split()
            assert fmt.count(r.capacity_blocks) in cells and fmt.count(r.opt_capacity_blocks) in cells
        subtitle = str(app.panel.border_subtitle)
        assert f"@ {fmt.count(at.capacity_blocks)} blk: {gap} ({fmt.points(at.block_gap)})" == subtitle
        app.set_view(ViewState(window="5m"))  # MIN's curve is of the whole trace: not a 5-minute window's
        await pilot.pause()
        text = screen_text(app)
        end = row_line(text, "target").index("MIN") + 2  # the column is right-aligned under its header
        assert OPT_ALL_TIME in text and row_line(text, "95 % cov")[end - 2 : end + 1] == "  –"
    app = panel_app(WorkingSetTable, snap, ViewState(window="all"))
    async with app.run_test(size=(80, 24)):
        assert f"{gap} @ {fmt.count(at.capacity_blocks)} blk" in screen_text(app)  # no bottom border there


async def test_before_the_whole_file_is_known_the_border_says_what_min_waits_for():
    import dataclasses

    from kvset.monitor import OPT_WAITING

    replayed = replay_snapshot()
    waiting = dataclasses.replace(
        replayed, results={**replayed.results, BeladyMin: BeladyMin(None, note=OPT_WAITING)}
    )
    app = panel_app(WorkingSetTable, waiting, ViewState(window="all"))
    async with app.run_test(size=(120, 40)):
        assert str(app.panel.border_subtitle) == OPT_WAITING
        assert "MIN" not in row_line(screen_text(app), "target")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_working_sets_with_min_screenshot(snap_compare, size):
    """The Mooncake trace replayed with --opt --capacity 10000: MIN's column and its gap to LRU."""
    assert snap_compare(
        panel_app(WorkingSetTable, mooncake_opt_snapshot(), ViewState(window="all")), terminal_size=size
    )


async def test_before_any_reuse_the_rows_say_so_and_nothing_fits():
    app = panel_app(WorkingSetTable, first_accesses_snapshot(), ViewState(window="all"))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert text.count(NO_REUSE) == 3  # 95, 99, 99.9 % coverage
    assert "≤0" not in text and " yes" not in text


async def test_each_row_shows_the_hit_rate_its_capacity_gives_in_the_units_hit_rate():
    snap = demo_snapshot()
    rows = snap.get(WorkingSets).rows_for("5m", "coverage")
    for unit, rate_of in (("blocks", "block_hit_rate"), ("tokens", "token_hit_rate")):
        app = panel_app(WorkingSetTable, snap, ViewState(unit=unit))
        async with app.run_test(size=(120, 40)):
            text = screen_text(app)
        assert " hit " in text.splitlines()[1] + " "
        for row in rows:
            line = row_line(text, fmt.target_label(row.target, "coverage"))
            assert fmt.percent(getattr(row, rate_of)) in line
