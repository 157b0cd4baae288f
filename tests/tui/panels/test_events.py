"""The events panel: what happened to the sources and the engine, newest first with its age."""

from __future__ import annotations

import pytest

from kvset import quantities as fmt
from kvset_tui.widgets.events import EventsPanel, event_age
from tests.support.tui_snapshots import demo_snapshot, empty_snapshot, engine_snapshot, panel_app, screen_text

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


async def test_newest_first_each_with_its_age():
    snap = demo_snapshot()
    app = panel_app(EventsPanel, snap)
    async with app.run_test(size=(120, 40)):
        lines = [line for line in screen_text(app).splitlines() if " ago " in line]
    newest_first = sorted(snap.events, key=lambda e: e.at, reverse=True)
    assert len(lines) == len(newest_first) == 3
    for line, event in zip(lines, newest_first, strict=True):
        assert f"{fmt.age(event_age(event, snap))} ago {event.kind} {event.text}"[:60] in line


async def test_an_engine_event_on_the_wall_clock():
    snap = engine_snapshot()
    app = panel_app(EventsPanel, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    (down,) = snap.events
    assert f"{fmt.age(event_age(down, snap))} ago source-down {down.text}" in text


async def test_no_events():
    app = panel_app(EventsPanel, empty_snapshot())
    async with app.run_test(size=(120, 40)):
        assert "no events" in screen_text(app)


async def test_a_short_screen_has_no_room_for_events():
    app = panel_app(EventsPanel, demo_snapshot())
    async with app.run_test(size=(80, 24)):
        assert not screen_text(app).strip()


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_events_screenshot(snap_compare, size):
    """The demo's phase changes (a 24-line screen hides the panel: the blank 80x24 screenshot says so)."""
    assert snap_compare(panel_app(EventsPanel, demo_snapshot()), terminal_size=size)
