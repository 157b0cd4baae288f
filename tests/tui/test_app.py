"""Pilot tests of the whole kvset-top app: every key, pause, export, a failing monitor, signals,
replaceable frames, redraws, themes. Each panel's own behaviour is tested in tests/tui/panels/."""

from __future__ import annotations

import csv
import json
import os
import signal

import pytest
from textual import events
from textual.widgets import Static

from kvset import quantities as fmt
from kvset.api import ChurnSeries, OperatingPoint, Reserve, ThrashingByWindow
from kvset_tui.app import PAUSED_INTERVAL_SECONDS, KvsetTopApp
from kvset_tui.help_screen import HelpScreen
from kvset_tui.messages import SnapshotReady
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.curve_plot import HitRateCurvePlot
from kvset_tui.widgets.status_line import StatusLine
from kvset_tui.widgets.working_sets import WorkingSetTable
from tests.support.tui_snapshots import (
    ContinuousMonitor,
    CrashingMonitor,
    ScriptedMonitor,
    demo_snapshot,
    engine_snapshot,
    fixed_clock,
    ranks_snapshot,
    screen_text,
    wait_until,
)

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


def make_app(snapshot=None, monitor=None, **kw) -> KvsetTopApp:
    return KvsetTopApp(monitor=monitor, snapshot=snapshot, clock=fixed_clock(), theme_name="dark", **kw)


async def test_help_lists_every_footer_key_with_what_it_does():
    app = make_app(ranks_snapshot())  # with data-parallel ranks, so that the rank key is offered too
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        text = str(app.screen.query_one("#help-text", Static).render())
    keys_section = text.split("Panels")[0]
    for binding in app.BINDINGS:
        assert binding.tooltip and binding.tooltip in keys_section, binding.id
        assert f" {app.get_key_display(binding)} " in keys_section, binding.id


async def test_a_user_key_map_rebinds_a_key_and_the_help_shows_the_new_one():
    app = make_app(engine_snapshot(), keymap={"kvset.pause": "P"})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert not app.view.paused  # p is no longer bound
        await pilot.press("P")
        assert app.view.paused
        await pilot.press("question_mark")
        text = str(app.screen.query_one("#help-text", Static).render())
    pause_line = next(line for line in text.splitlines() if "pause the display" in line)
    assert pause_line.startswith(" P ")


async def test_help_key_opens_panel_meanings_and_caveats_and_escape_closes():
    app = make_app(engine_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text", Static).render())
        for must in (
            "LRU only",
            "Belady",
            "Full attention only",
            "reserve panel",
            "Today's trace",
            "drifts",
            "Thrashing",
            "Working sets",
            "Page churn",
            "Reserve",
            "Status line",
        ):
            assert must in text, must
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark", "question_mark")  # ? toggles it closed as well
        assert not isinstance(app.screen, HelpScreen)


async def test_pause_freezes_display_while_analysis_goes_on():
    monitor = ContinuousMonitor(demo_snapshot(), interval=0.05)
    app = make_app(monitor=monitor)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq >= 3)
        await pilot.press("p")
        frozen = app.shown
        received = app.frames_received
        status = app.query_one(StatusLine)
        assert "PAUSED" in screen_text(app)
        renders_before = status.renders
        await wait_until(pilot, lambda: app.frames_received >= received + 5)
        assert app.shown is frozen  # display frozen
        assert app.latest is not None and app.latest.seq > frozen.seq  # analysis went on
        assert status.renders == renders_before  # nothing redrawn while paused
        await pilot.press("p")
        assert app.shown is app.latest and app.shown.seq > frozen.seq
        assert "PAUSED" not in screen_text(app)


async def test_pause_slows_the_monitors_snapshots_and_resume_restores_them():
    monitor = ScriptedMonitor([demo_snapshot()], interval=0.5)
    app = make_app(monitor=monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert monitor.interval == PAUSED_INTERVAL_SECONDS  # nobody looks: fewer snapshots, same analysis
        await pilot.press("p")
        assert monitor.interval == 0.5


async def test_keys_change_the_view_while_paused_without_taking_new_data():
    monitor = ContinuousMonitor(demo_snapshot(), interval=0.05)
    app = make_app(monitor=monitor)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        await pilot.press("p")
        frozen = app.shown
        await pilot.press("w")
        assert app.view.window == "1h" and app.shown is frozen
        assert "1h window" in screen_text(app)


async def test_w_cycles_windows_and_the_panels_say_which():
    app = make_app(demo_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        seen = []
        for _ in range(4):
            await pilot.press("w")
            seen.append(app.view.window)
            table = app.query_one(WorkingSetTable)
            assert f"{app.view.window} window" in str(table.border_title)
        assert seen == ["1h", "all", "1m", "5m"]
        assert f"Thrashing · {app.view.window} window" in screen_text(app)


async def test_w_shows_each_windows_own_curve_and_rows():
    snap = engine_snapshot()
    app = make_app(snap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")  # 1h: the snapshot holds every window's curve and rows
        assert app.view.window == "1h"
        assert "1h window" in str(app.query_one(WorkingSetTable).border_title)
        assert "· 1h" in str(app.query_one(HitRateCurvePlot).border_subtitle)


async def test_u_cycles_units_and_skips_gib_without_a_model():
    app = make_app(demo_snapshot())  # block size known, no model geometry
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("u")
        assert app.view.unit == "tokens"
        assert "vs tokens" in str(app.query_one(HitRateCurvePlot).border_title)
        assert "tok" in screen_text(app)
        await pilot.press("u")
        assert app.view.unit == "blocks"
        notices = [n.message for n in app._notifications]
        assert any("GiB" in m and "--model" in m for m in notices)


async def test_u_reaches_gib_with_a_model_and_the_table_shows_it():
    app = make_app(engine_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("u", "u")
        assert app.view.unit == "GiB"
        assert "token hit rate vs GiB" in str(app.query_one(HitRateCurvePlot).border_title)
        table = app.query_one(WorkingSetTable).render()
        table = table.renderables[0] if hasattr(table, "renderables") else table  # the table above its notes
        assert "GiB" in table.columns[1].header  # narrow: one unit column
        await pilot.press("u")
        assert app.view.unit == "blocks"


async def test_l_toggles_log_and_linear_axis():
    app = make_app(engine_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        plot = app.query_one(HitRateCurvePlot)
        assert str(plot.border_title).endswith("log")
        log_text = screen_text(app)
        await pilot.press("l")
        assert app.view.log_x is False
        assert str(plot.border_title).endswith("linear")
        assert screen_text(app) != log_text
        await pilot.press("l")
        assert app.view.log_x is True


async def test_t_cycles_coverage_and_absolute_targets():
    app = make_app(engine_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        assert "95 % cov" in screen_text(app)
        await pilot.press("t")
        assert app.view.target_mode == "absolute"
        text = screen_text(app)
        assert "70 % abs" in text and "99.9 % cov" not in text  # (the reserve panel keeps its 95 % cov)
        await pilot.press("t")
        assert app.view.target_mode == "coverage"


async def test_e_exports_json_svg_and_csv_and_shows_the_paths(tmp_path):
    snap = engine_snapshot(seq=7)
    app = make_app(snap, export_dir=tmp_path / "out")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        assert app.last_export is not None
        json_path, svg_path, csv_path = app.last_export
        assert json_path.parent == tmp_path / "out" and json_path.exists() and svg_path.exists()
        data = json.loads(json_path.read_text())
        assert data["seq"] == 7
        assert svg_path.read_text().lstrip().startswith("<svg")
        assert "Thrashing" in svg_path.read_text()
        messages = " ".join(n.message for n in app._notifications)
        assert str(json_path) in messages and str(svg_path) in messages and str(csv_path) in messages
    # the curve as CSV: the JSON's own rows (the rows every report shows), for all time and the window on screen
    rows = list(csv.DictReader(csv_path.open()))
    assert {r["window"] for r in rows} == {"all", "5m"}
    for window in ("all", "5m"):
        expected = data["windows"][window]["curve"]
        got = [r for r in rows if r["window"] == window]
        assert [int(r["capacity_blocks"]) for r in got] == [e["capacity_blocks"] for e in expected]
        assert [float(r["token_hit_rate"]) for r in got] == [e["token_hit_rate"] for e in expected]
        assert [float(r["capacity_gib"]) for r in got] == [e["capacity_gib"] for e in expected]


async def test_e_without_a_snapshot_says_so():
    app = make_app(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        assert app.last_export is None
        assert any("nothing to export" in n.message for n in app._notifications)


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_q_quits_and_stops_the_monitor(key):
    monitor = ScriptedMonitor([demo_snapshot()])
    app = make_app(monitor=monitor)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        await pilot.press(key)
    assert monitor.stopped.wait(2.0)
    assert app.return_code == 0


async def test_a_crashing_monitor_is_reported_and_the_app_keeps_running():
    app = make_app(monitor=CrashingMonitor(demo_snapshot()))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.query_one(StatusLine).monitor_error is not None)
        assert "RuntimeError: analyzer state corrupted" in screen_text(app)
        await pilot.press("l")
        assert app.view.log_x is False
        assert app.shown is not None and app.shown.demo  # the last good frame stays on screen


async def test_snapshot_messages_replace_each_other_so_only_the_newest_is_drawn():
    app = make_app(None)
    snaps = [demo_snapshot(seq) for seq in range(1, 41)]
    async with app.run_test(size=SIZE) as pilot:
        for snap in snaps:  # queued faster than the UI handles them (no await in between)
            app.post_message(SnapshotReady(snap))
        await pilot.pause()
        assert app.shown is snaps[-1]
        assert app.frames_received <= 3  # the rest were superseded in the queue


def test_snapshot_message_is_replaceable_only_by_another_snapshot():
    a, b = SnapshotReady(demo_snapshot(1)), SnapshotReady(demo_snapshot(2))
    assert a.can_replace(b) and b.can_replace(a)
    assert not a.can_replace(events.Key("a", "a"))


async def test_panels_redraw_only_when_their_part_changed():
    snap = engine_snapshot()
    app = make_app(snap)
    async with app.run_test(size=SIZE) as pilot:
        counts = {id(p): p.renders for p in app.panels}
        app.post_message(SnapshotReady(snap))  # the same frame again
        await pilot.pause()
        assert {id(p): p.renders for p in app.panels} == counts
        await pilot.press("l")  # only the curve depends on the axis scale (and the status line says it)
        changed = {type(p).__name__ for p in app.panels if p.renders != counts[id(p)]}
        assert changed == {"HitRateCurvePlot", "StatusLine"}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_panel_shows_numbers_at_both_sizes(size):
    snap = engine_snapshot()
    t, op = snap.get(ThrashingByWindow).windows["5m"], snap.get(OperatingPoint)
    share = f"{snap.get(Reserve).total_bytes / snap.get(Reserve).pool_bytes:.0%}"
    app = make_app(snap)
    async with app.run_test(size=size) as pilot:
        # a loaded machine may need more than one refresh before every panel has laid out
        await wait_until(pilot, lambda: "q Quit" in screen_text(app) and "Page churn" in screen_text(app))
        text = screen_text(app)
        for must in (
            "LRU block hit rate",
            "Thrashing",
            t.level.upper(),
            fmt.percent(t.blocks.restore_share),
            "re-stores",
            "Working sets",
            "99.9 % cov",
            "Reserve",
            share,
            "Page churn",
            fmt.rate(snap.get(ChurnSeries).accesses[-1]),
            fmt.percent(op.measured_token_hit_rate),
            "events tcp://127.0.0.1:5557",
            "? Help",
            "q Quit",
        ):
            assert must in text, (size, must)
        assert ("Events" in text) == (size == (120, 40))  # the events panel collapses on short screens
        # a short screen puts two sparklines per line under short labels
        assert ("re-refs/s" in text, "reref/s" in text) == (
            (True, False) if size == (120, 40) else (False, True)
        )


async def test_a_narrow_terminal_keeps_quit_in_the_footer():
    app = make_app(engine_snapshot())
    async with app.run_test(size=(60, 20)) as pilot:
        # the footer is drawn after the first frame; on a loaded machine one pause is not always enough
        await wait_until(pilot, lambda: screen_text(app).splitlines()[-1].strip() != "")
        footer = screen_text(app).splitlines()[-1]
    assert "q Quit" in footer and "? Help" in footer


async def test_no_color_uses_the_monochrome_theme(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = KvsetTopApp(snapshot=engine_snapshot(), clock=fixed_clock(), theme_name="dark")
    assert app.palette.name == "mono"
    async with app.run_test(size=(80, 24)):
        svg = app.export_screenshot()
    assert "#4fa3e0" not in svg.lower() and "#ff5f56" not in svg.lower()  # none of the dark theme's colours


async def test_the_app_never_sets_term():
    before = os.environ.get("TERM")
    app = make_app(engine_snapshot())
    async with app.run_test(size=(80, 24)):
        pass
    assert os.environ.get("TERM") == before


def test_default_view_is_five_minutes_blocks_log_coverage():
    assert ViewState() == ViewState(
        window="5m", unit="blocks", log_x=True, target_mode="coverage", paused=False
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_sigterm_and_sighup_leave_as_q_does(signum):
    """`kill` and a hang-up end the app through its own exit (which restores the terminal), with the
    shell's 128 + signal exit code; the monitor is stopped."""
    reached_default = []
    previous = signal.signal(signum, lambda *_: reached_default.append(True))  # the app must take it first
    monitor = ScriptedMonitor([demo_snapshot()])
    app = make_app(monitor=monitor)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.shown is not None)
            os.kill(os.getpid(), signum)
            await pilot.pause(0.2)
    finally:
        signal.signal(signum, previous)
    assert not reached_default
    assert app.return_value == 128 + signum
    assert monitor.stopped.wait(2.0)
