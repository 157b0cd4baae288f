"""Which window the app shows: the direct window keys, and a replay that has read its whole file
opening on all time (what `kvset analyze` of the file reports), unless the user chose a window."""

from __future__ import annotations

import dataclasses

import pytest

from kvset.api import SourceHealth
from kvset_tui.app import KvsetTopApp
from kvset_tui.cli import build_parser, initial_window
from kvset_tui.messages import SnapshotReady
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.working_sets import WorkingSetTable
from tests.support.tui_snapshots import ScriptedMonitor, demo_snapshot, fixed_clock, wait_until

SIZE = (120, 40)
pytestmark = pytest.mark.anyio


def replay_snapshot(seq: int, finished: bool):
    health = SourceHealth(
        source="replay trace.jsonl",
        kind="replay",
        connected=not finished,
        state="replaying",
        finished=finished,
    )
    return dataclasses.replace(demo_snapshot(), seq=seq, sources=(health,), demo=False)


def make_app(monitor=None, view=None) -> KvsetTopApp:
    return KvsetTopApp(monitor=monitor, snapshot=None, clock=fixed_clock(), theme_name="dark", view=view)


async def test_direct_keys_pick_each_window_and_the_table_says_which():
    app = make_app()
    app.latest = demo_snapshot()
    async with app.run_test(size=SIZE) as pilot:
        for key, label in (("a", "all"), ("1", "1m"), ("h", "1h"), ("5", "5m")):
            await pilot.press(key)
            assert app.view.window == label and app.view.window_chosen
            assert f"{label} window" in str(app.query_one(WorkingSetTable).border_title)


async def test_a_finished_replay_moves_to_all_time_once():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.post_message(SnapshotReady(replay_snapshot(1, False)))
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq == 1)
        assert app.view.window == "5m"  # still reading: the live window
        app.post_message(SnapshotReady(replay_snapshot(2, True)))
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq == 2)
        assert app.view.window == "all" and not app.view.window_chosen
        assert "all window" in str(app.query_one(WorkingSetTable).border_title)
        await pilot.press("w")  # the user's choice from here on
        app.post_message(SnapshotReady(replay_snapshot(3, True)))
        await wait_until(pilot, lambda: app.shown is not None and app.shown.seq == 3)
        assert app.view.window == "1m"


async def test_a_window_the_user_chose_is_kept_when_the_replay_finishes():
    monitor = ScriptedMonitor([replay_snapshot(1, True)])
    app = make_app(monitor=monitor, view=ViewState(window="1h", window_chosen=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.shown is not None)
        assert app.view.window == "1h"


@pytest.mark.parametrize(
    "argv,window",
    [
        (["--replay", "t.jsonl", "--speed", "max"], "all"),
        (["--replay", "t.jsonl"], "5m"),
        (["--replay", "t.jsonl", "--speed", "10"], "5m"),
        (["--replay", "t.jsonl", "--speed", "max", "--window", "1m"], "1m"),
        (["--demo", "--speed", "max"], "5m"),  # the demo never finishes: its live window
    ],
)
def test_the_window_the_app_opens_on(argv, window):
    assert initial_window(build_parser().parse_args(argv)) == window
