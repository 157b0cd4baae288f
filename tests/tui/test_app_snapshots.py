"""Screenshots of the whole app (pytest-textual-snapshot): fixed data, fixed clock, each theme at 80x24
and 120x40, the demo, the empty start, the help, monochrome. Each panel's own screenshots are beside
its tests in tests/tui/panels/.

The accepted SVGs live in tests/tui/__snapshots__/test_app_snapshots/; after a deliberate change to the
look, re-create them with `pytest tests/tui/test_app_snapshots.py --snapshot-update` and check them by eye.
"""

from __future__ import annotations

import pytest

from kvset_tui.app import KvsetTopApp
from kvset_tui.theming import load_theme
from tests.support.tui_snapshots import demo_snapshot, empty_snapshot, engine_snapshot, fixed_clock


def app_for(snapshot, theme: str) -> KvsetTopApp:
    return KvsetTopApp(snapshot=snapshot, palette=load_theme(theme), clock=fixed_clock())


@pytest.mark.parametrize("theme", ["dark", "light", "ansi"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_engine_view_per_theme_and_size(snap_compare, theme, size):
    """A thrashing engine with a model: operating point, reserve, a failing /metrics source."""
    assert snap_compare(app_for(engine_snapshot(), theme), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_demo_view(snap_compare, size):
    """The demo: DEMO banner, no model (no GiB, no reserve), window curve and events."""
    assert snap_compare(app_for(demo_snapshot(), "dark"), terminal_size=size)


def test_empty_view(snap_compare):
    """Right after start: every panel says what it is waiting for."""
    assert snap_compare(app_for(empty_snapshot(), "dark"), terminal_size=(80, 24))


def test_monochrome_view(snap_compare):
    """NO_COLOR: terminal default colours; levels told apart by text and reverse video."""
    assert snap_compare(app_for(engine_snapshot(), "mono"), terminal_size=(80, 24))


def test_gib_linear_absolute_view(snap_compare):
    """After u u l t: GiB on a linear axis with the absolute targets."""
    assert snap_compare(
        app_for(engine_snapshot(), "dark"), press=["u", "u", "l", "t"], terminal_size=(120, 40)
    )


def test_narrow_terminal_keeps_quit(snap_compare):
    """60x20: panels squeezed, the footer cut, its quit key still on screen."""
    assert snap_compare(app_for(engine_snapshot(), "dark"), terminal_size=(60, 20))


def test_help_screen(snap_compare):
    assert snap_compare(app_for(engine_snapshot(), "dark"), press=["question_mark"], terminal_size=(80, 24))
