"""The status line: each source's health in one or two lines, the ingest rate (wall clock) and the
view; a failing source stays readable, ages follow the clock."""

from __future__ import annotations

import threading

import pytest

from kvset import quantities as fmt
from kvset.snapshot.builder import SnapshotConfig
from kvset.sources.replay import ReplaySource
from kvset.types import SourceHealth
from kvset_tui.app import KvsetTopApp
from kvset_tui.widgets.status_line import StatusLine
from tests.support.tui_snapshots import (
    METRICS_URL,
    NOW,
    ScriptedMonitor,
    demo_snapshot,
    empty_snapshot,
    engine_snapshot,
    fed_snapshot,
    fixed_clock,
    panel_app,
    screen_text,
    wait_until,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


async def test_a_failing_source_shows_in_health_and_the_app_keeps_running():
    failing = engine_snapshot(seq=1)
    recovered = engine_snapshot(seq=2)
    monitor = ScriptedMonitor([failing, recovered], interval=0.3)
    app = KvsetTopApp(monitor=monitor, clock=fixed_clock(), theme_name="dark")
    metrics = failing.sources[1]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        text = screen_text(app)
        assert f"○ metrics {METRICS_URL}" in text
        assert "down: connection refused" in text
        assert f"{metrics.rejected_total} rejected ({metrics.rejected[0].reason}" in text
        assert f"data {fmt.age(NOW - metrics.last_data_at)} ago" in text
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq == 2)
        await pilot.press("w")  # still responsive
        assert app.view.window == "1h"


async def test_last_data_age_follows_the_clock_but_freezes_while_paused():
    now = [NOW]
    snap = engine_snapshot()
    age = NOW - snap.sources[0].last_data_at
    app = KvsetTopApp(snapshot=snap, clock=lambda: now[0], theme_name="dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert f"data {fmt.age(age)} ago" in screen_text(app)
        now[0] += 10.0
        app._tick_ages()  # what the once-a-second timer calls
        await pilot.pause()
        assert f"data {fmt.age(age + 10)} ago" in screen_text(app)
        await pilot.press("p")
        now[0] += 100.0
        app._tick_ages()
        await pilot.pause()
        assert f"data {fmt.age(age + 10)} ago" in screen_text(app)


async def test_the_ingest_rate_says_it_is_per_wall_clock_second():
    snap = demo_snapshot()
    app = panel_app(StatusLine, snap)
    async with app.run_test(size=(120, 40)):
        text = screen_text(app)
    assert f"ingest {fmt.rate(snap.accesses_per_second, ' acc/s')} wall clock" in text


async def test_a_source_that_has_delivered_nothing_says_its_state_and_data_never():
    snap = empty_snapshot()
    app = panel_app(StatusLine, snap)
    async with app.run_test(size=(80, 24)):
        text = screen_text(app)
    assert f"● {snap.sources[0].source} · reading trace · data never · 0 rejected" in text


def failed_replay_health(path) -> SourceHealth:
    """What the real replay source reports for a file with no request in it."""
    updates = list(ReplaySource(str(path), speed=None).updates(threading.Event()))
    return updates[-1].health


async def test_a_message_with_a_line_break_stays_on_its_source_line(tmp_path):
    bad = tmp_path / "one-line.jsonl"
    bad.write_text("not json\n")
    health = failed_replay_health(bad)
    # the reader's message has two lines; a state holds its first, and no raw line break ever
    assert "\n" not in health.state and "(1 line read)" in health.state
    app = panel_app(StatusLine, fed_snapshot((), SnapshotConfig(), (health,)))
    async with app.run_test(size=(200, 40)):
        lines = [line for line in screen_text(app).splitlines() if line.strip()]
    head = f"◼ {health.source} · failed: no valid request in {bad} (1 line read)"
    assert lines[0].strip().startswith(head.strip()), lines
    assert lines[-1].strip().startswith("ingest")  # the view line is still the last one


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_status_line_screenshot(snap_compare, size):
    """Two sources: the events connected, /metrics down with rejected responses."""
    assert snap_compare(panel_app(StatusLine, engine_snapshot()), terminal_size=size)


def test_a_backlog_is_shown_on_its_source_line_and_opens_its_second_line():
    from kvset_tui.theming import choose_theme
    from kvset_tui.widgets.status_line import source_lines

    behind = SourceHealth(
        "events tcp://127.0.0.1:5557",
        "events",
        True,
        "connected",
        last_data_at=NOW,
        accesses=10_000,
        details=(("backlog", "3 batches (900 accesses) waiting for the analyzer"),),
    )
    lines = source_lines(behind, NOW, choose_theme("mono"), width=200, compact=True)
    text = " ".join(line.plain for line in lines)
    assert "backlog: 3 batches (900 accesses) waiting for the analyzer" in text
    calm = source_lines(
        SourceHealth(behind.source, "events", True, "connected", last_data_at=NOW),
        NOW,
        choose_theme("mono"),
        width=40,
        compact=True,
    )
    narrow = source_lines(behind, NOW, choose_theme("mono"), width=40, compact=True)
    assert (
        len(calm) == 1 and len(narrow) == 2
    )  # a healthy source keeps to one line, a falling-behind one does not


def test_a_down_sources_hint_wraps_instead_of_being_cut():
    from kvset_tui.theming import choose_theme
    from kvset_tui.widgets.status_line import source_lines

    hint = (
        "down: no publisher answered on tcp://10.0.0.7:5557: is the engine started with --kv-events-config?"
    )
    down = SourceHealth("events tcp://10.0.0.7:5557", "events", False, hint)
    for width in (56, 80):
        lines = source_lines(down, NOW, choose_theme("mono"), width=width)
        assert all(line.cell_len <= width for line in lines)
        shown = " ".join(line.plain.strip() for line in lines)
        assert "is the engine started with --kv-events-config?" in shown and "…" not in shown
    # on a short screen it stays cut at the edge, as every line there is
    short = source_lines(down, NOW, choose_theme("mono"), width=56, compact=True)
    assert len(short) == 2
