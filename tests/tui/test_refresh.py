"""What kvset-top redraws, and when: a panel whose picture did not change is not redrawn, the slow
panels take new data at their own pace (a key at once), the age tick does not repeat a fresh frame.
Each checked by what the panels counted (renders) and show, never by time taken."""

from __future__ import annotations

import pytest
from rich.color import Color
from rich.text import Text
from textual.visual import Visual, visualize

from kvset_tui.ansi_frames import AnsiFrames
from kvset_tui.app import KvsetTopApp
from kvset_tui.messages import SnapshotReady
from kvset_tui.widgets.curve_plot import HitRateCurvePlot
from kvset_tui.widgets.reserve import ReservePanel
from kvset_tui.widgets.status_line import StatusLine
from kvset_tui.widgets.working_sets import WorkingSetTable
from tests.support.tui_snapshots import demo_snapshot, engine_snapshot, fixed_clock, screen_text, wait_until

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


def make_app(snapshot) -> KvsetTopApp:
    return KvsetTopApp(snapshot=snapshot, clock=fixed_clock(), theme_name="dark")


async def test_a_new_snapshot_drawing_the_same_curve_does_not_redraw_it():
    app = make_app(demo_snapshot(1))
    async with app.run_test(size=SIZE) as pilot:
        curve, status = app.query_one(HitRateCurvePlot), app.query_one(StatusLine)
        curve.DATA_FRAME_SECONDS = 0.0  # every snapshot at once: only the picture decides here
        before, status_before = curve.renders, status.renders
        same_data = demo_snapshot(2)  # another snapshot, the same curve
        app.post_message(SnapshotReady(same_data))
        await wait_until(pilot, lambda: curve.snapshot is same_data)
        assert curve.renders == before  # taken, not redrawn
        assert status.renders > status_before  # while the status line (its seq) was
        await pilot.press("l")  # the axis scale changes the picture: drawn
        assert curve.renders == before + 1


async def test_the_slow_panels_take_new_data_at_their_pace_but_a_key_at_once():
    app = make_app(demo_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        curve, table, reserve = (
            app.query_one(HitRateCurvePlot),
            app.query_one(WorkingSetTable),
            app.query_one(ReservePanel),
        )
        for slow in (curve, table):
            slow.DATA_FRAME_SECONDS = 3600.0  # far longer than this test can take
        first = curve.snapshot
        renders = curve.renders, table.renders, reserve.renders
        newer = engine_snapshot()
        app.post_message(SnapshotReady(newer))
        await wait_until(pilot, lambda: app.shown is newer)
        assert reserve.snapshot is newer and reserve.renders > renders[2]  # a quick panel takes it
        assert curve.snapshot is first and table.snapshot is first  # the slow ones keep theirs
        assert (curve.renders, table.renders) == renders[:2]
        await pilot.press("w")  # a key: every panel shows the newest data in the new view at once
        assert curve.snapshot is newer and table.snapshot is newer
        assert curve.renders == renders[0] + 1 and table.renders == renders[1] + 1


async def test_an_export_shows_the_data_it_saves_in_every_panel(tmp_path):
    app = KvsetTopApp(snapshot=demo_snapshot(), clock=fixed_clock(), theme_name="dark", export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        curve = app.query_one(HitRateCurvePlot)
        curve.DATA_FRAME_SECONDS = 3600.0
        newer = engine_snapshot()
        app.post_message(SnapshotReady(newer))
        await wait_until(pilot, lambda: app.shown is newer)
        assert curve.snapshot is not newer
        await pilot.press("e")
        await wait_until(pilot, lambda: app.last_export is not None)
        assert curve.snapshot is newer  # the screenshot beside the JSON is of the same snapshot


async def test_a_slow_panel_shows_the_newest_data_once_its_time_is_up():
    app = make_app(demo_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        curve = app.query_one(HitRateCurvePlot)
        curve.DATA_FRAME_SECONDS = 0.5
        newer, newest = engine_snapshot(1), engine_snapshot(2)
        app.post_message(SnapshotReady(newer))
        app.post_message(SnapshotReady(newest))
        # no further snapshot comes: the pending one is shown all the same, never the older one
        await wait_until(pilot, lambda: curve.snapshot is newest)


async def test_the_age_tick_does_not_redraw_a_frame_just_drawn():
    now = [1_767_225_600.0]
    app = KvsetTopApp(snapshot=demo_snapshot(), clock=lambda: now[0], theme_name="dark")
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusLine)
        app.post_message(SnapshotReady(demo_snapshot(5)))
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq == 5)
        drawn = status.renders
        app._tick_ages()  # what the once-a-second timer calls, right after the frame
        await pilot.pause()
        assert status.renders == drawn
        now[0] += 3.0  # no frame since: the ages move on screen
        app._tick_ages()
        await pilot.pause()
        assert status.renders == drawn + 1
        assert "PAUSED" not in screen_text(app)


def test_frames_decode_as_rich_does_and_reuse_the_lines_that_did_not_change():
    red, blue, reset = "\x1b[38;5;1m", "\x1b[38;5;4m", "\x1b[0m"
    # a style left open at a line's end colours the next line: the reuse must respect it
    one = f"axis {red}curve{reset}\n{blue}open\nstill blue{reset}\n\nflat tail"
    two = f"axis {red}curve{reset}\n{blue}moved\nstill blue{reset}\n\nflat tail"
    frames = AnsiFrames()
    for frame in (one, two, one):
        assert frames.text(frame) == Text.from_ansi(frame)
    # the first frame decodes its 5 lines; each next one only the line that changed
    assert frames.decoded_lines == 5 + 1 + 1


def test_a_plot_frame_decodes_as_rich_does_with_each_colour_made_once(monkeypatch):
    # plotext resets and sets its few colours before every run of cells: hundreds of codes a frame
    cells = [f"\x1b[0m\x1b[48;2;21;26;33m\x1b[38;2;{c};163;224m{ch}" for c, ch in ((79, "⢀⠜"), (229, "·"))]
    frame = "\n".join(f"{k:3} " + "".join(cells * 20) + " \x1b[0m" for k in range(30))
    frame += "\n\x1b]8;id=1;https://x.org\x1b\\link\x1b]8;;\x1b\\ and \x1b[2Kother escapes\rend"
    made = []
    from_rgb = Color.from_rgb.__func__

    def counted(cls, *rgb):
        made.append(rgb)
        return from_rgb(cls, *rgb)

    frames = AnsiFrames()
    expected = Text.from_ansi(frame)
    monkeypatch.setattr(Color, "from_rgb", classmethod(counted))
    assert frames.text(frame) == expected
    assert len(made) <= 10  # each colour after each style once, not once per code (1,200 of them)


async def test_a_redrawn_plot_makes_strips_only_for_its_changed_lines_and_they_are_textuals_own(
    monkeypatch,
):
    # plotext-like frames: coloured cells on every line; the second frame moves one line only
    # (a background, a bold 256-colour run, plain gaps: each converted as Textual converts it)
    row = "\x1b[48;2;21;26;33m\x1b[38;2;79;163;224m⢀⠜\x1b[0m \x1b[1;38;5;4m·\x1b[0m"
    first = "\n".join(f"{k:3} {row * 8}" for k in range(30))
    second = first.replace(f" 12 {row * 8}", f" 12 {row * 7}  moved")
    frames = iter([first, second])
    monkeypatch.setattr(HitRateCurvePlot, "_draw", lambda self: next(frames))
    app = make_app(demo_snapshot(1))
    async with app.run_test(size=SIZE) as pilot:
        curve = app.query_one(HitRateCurvePlot)
        await pilot.pause()
        height = curve.size.height
        assert curve.lines_made == min(height, 30)
        await pilot.press("l")  # a new picture: the first frame's lines are reused but one
        await pilot.pause()
        assert curve.lines_made == min(height, 30) + 1
        whole = Visual.to_strips(
            curve, visualize(curve, Text.from_ansi(second)), curve.size.width, height, curve.visual_style
        )
        shown = [curve.render_line(y) for y in range(height)]
        assert [cells(s) for s in shown[:30]] == [cells(s) for s in whole[:30]]


def cells(strip) -> tuple[str, list]:
    """A strip's text and the style of each run of it (however Textual cut it into segments)."""
    return strip.text, [segment.style for segment in strip.simplify()]


async def test_hidden_panels_ask_no_layout_pass_for_new_data():
    """Without --tiers and --by their panels are hidden: new data for them used to lay the whole
    screen out again every second."""
    app = make_app(demo_snapshot(1))
    async with app.run_test(size=SIZE) as pilot:
        # the start's own layout passes done first (on a loaded machine one frame is not enough)
        await wait_until(pilot, lambda: app.shown is not None and not app.screen._layout_required)
        await pilot.pause()
        screen = app.screen
        passes = []
        layout = screen._refresh_layout

        def counted(*args, **kwargs):
            passes.append(1)
            return layout(*args, **kwargs)

        screen._refresh_layout = counted  # type: ignore[method-assign]
        for seq in (2, 3):
            newer = demo_snapshot(seq)  # the same data: no panel's height changes
            app.post_message(SnapshotReady(newer))
            await wait_until(pilot, lambda newer=newer: app.shown is newer)
            await pilot.pause()
        assert passes == []


def count_lines_painted(panel) -> list[int]:
    """Counts the content lines Textual asks the panel for (it asks for those it repaints)."""
    painted = [0]
    line_of = panel.render_line

    def counted(y):
        painted[0] += 1
        return line_of(y)

    panel.render_line = counted
    return painted


async def test_new_data_repaints_only_the_lines_it_changed_and_the_screen_is_as_a_whole_repaint():
    app = make_app(demo_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusLine)
        await pilot.pause()
        lines = len(status.content_strips())
        assert lines >= 2  # a source line and the ingest line: one changes, the other not
        painted = count_lines_painted(status)
        await pilot.press("p")  # PAUSED joins the ingest line; the source's line stays the same
        await pilot.pause()
        assert "PAUSED" in screen_text(app)
        assert 1 <= painted[0] < lines
        partly = screen_text(app)
        for panel in app.panels:
            panel.refresh()  # every line drawn anew: what the screen would show without the saving
        await pilot.pause()
        assert screen_text(app) == partly


async def test_a_title_set_to_what_it_was_repaints_nothing():
    app = make_app(demo_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        curve = app.query_one(HitRateCurvePlot)
        await pilot.pause()
        painted = count_lines_painted(curve)
        curve.on_data()  # what each snapshot does: the titles set again, to the same text
        await pilot.pause()
        assert painted[0] == 0
        curve.border_title = "another title"
        await pilot.pause()
        assert painted[0] > 0 and "another title" in screen_text(app)
