"""The tiers panel (--tiers): each tier's size in the unit `u` selects, its share of all accesses in
blocks and tokens, the misses left, the smallest next tier; where it sits in the app (in the Events
panel's place, and in the Reserve panel's on a short screen); its screenshots at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from kvset import quantities as fmt
from kvset.api import EngineTier, Tiers
from kvset_tui.app import KvsetTopApp
from kvset_tui.capacity_units import capacity_text
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.tiers import WAITING, TiersPanel, measured_text
from tests.support.tui_snapshots import (
    NEXT_TIER_TARGET,
    engine_snapshot,
    fixed_clock,
    panel_app,
    screen_text,
    tiers_snapshot,
    wait_until,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


def tier_line(text: str, index: int) -> str:
    return next(line for line in text.splitlines() if line.strip(" │").startswith(f"{index} "))


@pytest.mark.parametrize("unit", ["blocks", "tokens", "GiB"])
async def test_each_tier_shows_its_size_in_the_chosen_unit_and_its_shares(unit):
    snap = tiers_snapshot()
    app = panel_app(TiersPanel, snap, ViewState(unit=unit))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert len(snap.get(Tiers).plan.tiers) == 2
    for t in snap.get(Tiers).plan.tiers:
        line = tier_line(text, t.index)
        assert capacity_text(t.capacity_blocks, snap, unit) in line
        cells = line.rstrip(" │").rsplit(maxsplit=4)  # ..., block share, "%", token share, "%"
        assert " ".join(cells[-4:]) == f"{fmt.percent(t.block_hit_rate)} {fmt.percent(t.token_hit_rate)}"
    miss = next(line for line in text.splitlines() if line.strip(" │").startswith("miss"))
    assert (
        fmt.percent(snap.get(Tiers).plan.miss_block_rate) in miss
        and fmt.percent(snap.get(Tiers).plan.miss_token_rate) in miss
    )
    n = snap.get(Tiers).plan.next_tier
    assert n.target == NEXT_TIER_TARGET and n.capacity_blocks > 0
    assert f"next tier for 99 % cov: {capacity_text(n.capacity_blocks, snap, unit)}" in text
    assert f"all tiers {fmt.percent(n.block_hit_rate)}" in text


async def test_the_shares_and_the_misses_add_up_to_all_accesses():
    snap = tiers_snapshot()
    plan = snap.get(Tiers).plan
    assert sum(t.block_hit_rate for t in plan.tiers) + plan.miss_block_rate == pytest.approx(1.0)
    app = panel_app(TiersPanel, snap)
    async with app.run_test(size=(120, 40)):
        assert str(app.panel.border_title) == f"Tiers · exclusive · miss {fmt.percent(plan.miss_block_rate)}"


async def test_a_short_screen_keeps_a_line_per_tier_and_the_next_tier():
    snap = tiers_snapshot()
    app = panel_app(TiersPanel, snap, ViewState(unit="GiB"))
    async with app.run_test(size=(80, 24)):
        lines = [line.strip() for line in screen_text(app).splitlines() if line.strip()]
    assert lines[0].startswith("─Tiers · exclusive · miss")
    for t, line in zip(snap.get(Tiers).plan.tiers, lines[1:3], strict=True):
        assert line.startswith(f"{t.index} ") and capacity_text(t.capacity_blocks, snap, "GiB") in line
        assert (
            f"{fmt.percent(t.block_hit_rate)} blk" in line and f"{fmt.percent(t.token_hit_rate)} tok" in line
        )
    assert lines[3].startswith("next 99 % cov: ")


async def test_tiers_in_bytes_before_the_block_size_is_known_say_so():
    import dataclasses

    snap = tiers_snapshot()  # what the builder gives before the first access: the tiers, not yet in blocks
    snap = dataclasses.replace(snap, results={**snap.results, Tiers: Tiers(None)})
    app = panel_app(TiersPanel, snap)
    async with app.run_test(size=(120, 40)):
        assert WAITING in screen_text(app)


async def test_the_app_shows_the_tiers_only_when_asked_and_the_reserve_gives_way_on_short_screens():
    for snap, size, shown in (
        (engine_snapshot(), (120, 40), ()),
        (tiers_snapshot(), (120, 40), ("tiers", "reserve")),
        (tiers_snapshot(), (80, 24), ("tiers",)),
    ):
        app = KvsetTopApp(snapshot=snap, clock=fixed_clock(), theme_name="dark")
        async with app.run_test(size=size) as pilot:
            await wait_until(pilot, lambda app=app, snap=snap: app.shown is snap)
            visible = {w.id for w in app.query("#side > *") if w.display}
            text = screen_text(app)
        assert ("tiers" in visible) == ("tiers" in shown) and ("Tiers ·" in text) == ("tiers" in shown)
        if shown:
            assert "events" not in visible  # the tiers take the Events panel's place
            assert ("reserve" in visible) == ("reserve" in shown)
            assert "near miss ≤ 1.25× cap" not in text  # explanations give way (they are in the help)
        else:
            assert {"events", "reserve"} <= visible


# SGLang HiCache's own tiers as kvset.figures.tiers.engine_tiers reads them off its metrics and events
HICACHE = (EngineTier(1, "device", 0.214, 41_000), EngineTier(2, "host", 0.305, 160_000))


def with_engine_tiers(plan: bool = True):
    import dataclasses

    snap = tiers_snapshot()
    tiers = Tiers(snap.get(Tiers).plan if plan else None, HICACHE, planned=plan)
    return dataclasses.replace(snap, results={**snap.results, Tiers: tiers})


async def test_the_engines_own_tiers_stand_beside_the_planned_shares_with_the_write_through_note():
    snap = with_engine_tiers()
    app = panel_app(TiersPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    for t in snap.get(Tiers).plan.tiers:
        assert tier_line(text, t.index).rstrip(" │").endswith(measured_text(HICACHE[t.index - 1]))
    assert "compare with --tier-mode inclusive" in text  # the plan is exclusive, HiCache writes through
    short_app = panel_app(TiersPanel, snap)
    async with short_app.run_test(size=(80, 24)):
        short = screen_text(short_app)
    assert f"{fmt.percent(0.305)} engine" in tier_line(short, 2)


async def test_the_engines_tiers_alone_without_a_plan():
    app = panel_app(TiersPanel, with_engine_tiers(plan=False))
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    host = tier_line(text, 2)
    assert "host" in host and fmt.percent(0.305) in host and fmt.count(160_000) in host
    assert "no tiers planned: give --tiers" in text and WAITING not in text


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_engine_tiers_screenshot(snap_compare, size):
    """--tiers 3GiB,2GiB beside an SGLang HiCache's measured device and host tiers."""
    assert snap_compare(panel_app(TiersPanel, with_engine_tiers(), ViewState(unit="GiB")), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_tiers_screenshot(snap_compare, size):
    """Qwen3-Next with --tiers 3GiB,2GiB --size-next-tier 0.99, in GiB."""
    assert snap_compare(panel_app(TiersPanel, tiers_snapshot(), ViewState(unit="GiB")), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_app_with_tiers_screenshot(snap_compare, size):
    """The whole app with --tiers: the tiers in the Events panel's place, the Reserve in two lines (and
    gone at 80x24), the explanation lines under Thrashing and Working sets given way."""
    app = KvsetTopApp(snapshot=tiers_snapshot(), clock=fixed_clock(), theme_name="dark")
    assert snap_compare(app, terminal_size=size)
