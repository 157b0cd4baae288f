"""The Principals panel (--by): one level at a time (`b` cycles), its principals sorted by the cache they
hold, each with its working set alone, its hit rate in the shared cache, its share held against its
share of the hits, a warning on the one that holds much more than it earns; its screenshots."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvset import quantities as fmt
from kvset.api import Principals
from kvset.core.principals_window import WindowSpan
from kvset_tui.app import KvsetTopApp
from kvset_tui.widgets.principals import HOG_MARK, NO_PRINCIPALS, PrincipalsPanel
from tests.support.tui_snapshots import (
    engine_snapshot,
    fixed_clock,
    panel_app,
    principals_snapshot,
    screen_text,
    wait_until,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


def row_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip(" │▲").startswith(f"{name} "))


async def test_rows_are_sorted_by_cache_held_with_their_shares_and_hit_rates():
    snap = principals_snapshot()
    result = snap.get(Principals)
    tenants = result.level_rows("tenant")
    app = panel_app(PrincipalsPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
        title = str(app.panel.border_title)
    assert title == f"Principals · by tenant · at {fmt.count(result.share_capacity_blocks)} blk · LRU model"
    held = sorted(tenants, key=lambda r: -r.cache_share)
    lines = text.splitlines()
    places = [lines.index(row_of(text, r.name)) for r in held]
    assert places == sorted(places)  # most cache held first
    for r in tenants:
        cells = row_of(text, r.name)
        for value in (r.hit_rate_at_share, r.cache_share, r.hit_share):
            assert fmt.percent(value) in cells
        assert f"{r.working_sets[0].capacity_blocks:,}" in cells


async def test_the_principal_holding_much_more_than_it_earns_is_flagged():
    snap = principals_snapshot()
    (flood,) = [r for r in snap.get(Principals).level_rows("tenant") if r.holds_more_than_it_earns]
    app = panel_app(PrincipalsPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert row_of(text, "flood").strip(" │").startswith(HOG_MARK)
    assert not row_of(text, "acme").strip(" │").startswith(HOG_MARK)
    warning = f"{HOG_MARK} flood holds {fmt.percent(flood.cache_share)} for {fmt.percent(flood.hit_share)} of the hits"
    assert warning in text
    assert "top displacer: flood" in text


async def test_b_cycles_the_level_in_the_app_and_the_help_lists_it():
    app = KvsetTopApp(snapshot=principals_snapshot(), clock=fixed_clock(), theme_name="dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        panel = app.query_one(PrincipalsPanel)
        assert panel.display and str(panel.border_title).startswith("Principals · by tenant")
        await pilot.press("b")
        await wait_until(pilot, lambda: "by session" in str(panel.border_title))
        assert "acme-2" in screen_text(app) and "(other) ×" in screen_text(app)
        await pilot.press("b")
        await wait_until(pilot, lambda: "by tenant" in str(panel.border_title))
        await pilot.press("question_mark")
        await pilot.pause()
        assert "cycle the Principals panel's level" in screen_text(app)


async def test_without_by_the_panel_is_hidden_and_b_says_why():
    app = KvsetTopApp(snapshot=engine_snapshot(), clock=fixed_clock(), theme_name="dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        assert not app.query_one(PrincipalsPanel).display
        await pilot.press("b")
        await pilot.pause()
        assert any("no principals: give --by" in n.message for n in app._notifications)
    app = panel_app(PrincipalsPanel, None)
    async with app.run_test(size=(80, 24)):
        assert not app.panel.display and NO_PRINCIPALS not in screen_text(app)


async def test_a_short_screen_keeps_the_top_rows_and_the_warning():
    snap = principals_snapshot()
    (flood,) = [r for r in snap.get(Principals).level_rows("tenant") if r.holds_more_than_it_earns]
    app = panel_app(PrincipalsPanel, snap)
    async with app.run_test(size=(80, 24)):
        text = screen_text(app)
        title = str(app.panel.border_title)
    assert (
        f"{HOG_MARK} flood {fmt.percent(flood.cache_share)} held, {fmt.percent(flood.hit_share)} of hits"
        in text
    )
    assert (
        "top displacer" not in text
        and "held: an LRU model" in text
        and title.startswith("Principals · tenant")
    )


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_principals_screenshot(snap_compare, size):
    """kvset analyze --by tenant,session of a flood beside two tenants re-reading their prefixes."""
    assert snap_compare(panel_app(PrincipalsPanel, principals_snapshot()), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_app_with_principals_screenshot(snap_compare, size):
    """The whole app with --by: the Principals panel in the side column."""
    app = KvsetTopApp(snapshot=principals_snapshot(), clock=fixed_clock(), theme_name="dark")
    assert snap_compare(app, terminal_size=size)


async def test_live_figures_over_the_window_say_so_and_a_whole_file_says_nothing():
    snap = principals_snapshot()
    result = snap.get(Principals)
    assert result.span is None or result.span.capacity is None  # kvset analyze: the whole file
    live = WindowSpan(accesses=1_048_576, seen=20_000_000, capacity=1_048_576, seconds=600.0)
    windowed = replace(snap, results={**snap.results, Principals: replace(result, span=live)})
    for shown, says in ((snap, None), (windowed, "over the last 1.05M accesses")):
        app = panel_app(PrincipalsPanel, shown)
        async with app.run_test(size=(120, 40)):
            text = screen_text(app)
        assert ("last 1.05M accesses" in text) == (says is not None)
        if says:
            assert says in text
