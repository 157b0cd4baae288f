"""The DEMO banner: shown for the built-in demo only, shortened on a narrow screen."""

from __future__ import annotations

import pytest

from kvset_tui.widgets.demo_banner import DEMO_TEXT, DEMO_TEXT_SHORT, DemoBanner
from tests.support.tui_snapshots import demo_snapshot, engine_snapshot, panel_app, screen_text

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


async def test_demo_banner_only_for_demo_snapshots():
    app = panel_app(DemoBanner, demo_snapshot())
    async with app.run_test(size=(120, 40)) as pilot:
        assert DEMO_TEXT in screen_text(app)
        app.show(engine_snapshot())
        await pilot.pause()
        assert "DEMO" not in screen_text(app)


async def test_a_narrow_screen_gets_the_short_banner():
    app = panel_app(DemoBanner, demo_snapshot())
    async with app.run_test(size=(80, 24)):
        text = screen_text(app)
    assert DEMO_TEXT_SHORT in text and DEMO_TEXT not in text


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_demo_banner_screenshot(snap_compare, size):
    assert snap_compare(panel_app(DemoBanner, demo_snapshot()), terminal_size=size)
