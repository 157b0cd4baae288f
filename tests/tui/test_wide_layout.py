"""On a wide terminal the side column takes its share of the width instead of staying 58 columns,
and an event too long for the Events panel wraps, so that its hint (at its end) is read, not cut."""

from __future__ import annotations

import dataclasses

import pytest

from kvset.types import TimelineEvent
from tests.support.tui_snapshots import NOW, demo_snapshot, engine_snapshot, screen_text
from tests.tui.test_app_snapshots import app_for

pytestmark = pytest.mark.anyio


async def test_the_side_column_grows_with_a_wide_terminal():
    widths = {}
    for size in ((120, 40), (200, 50), (240, 50)):
        app = app_for(engine_snapshot(), "dark")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            widths[size[0]] = app.query_one("#side").size.width
    assert widths[120] == 58 and widths[200] == 80 and widths[240] == 96


async def test_a_long_event_wraps_in_the_events_panel():
    hint = "no publisher answered on tcp://10.0.0.7:5557: is the engine started with --kv-events-config?"
    snap = dataclasses.replace(demo_snapshot(), events=(TimelineEvent(NOW - 5, "source-down", hint),))
    app = app_for(snap, "dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
    assert "--kv-events-config?" in text
