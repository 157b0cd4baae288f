"""`+`, `-` and space in the app act on the replay source itself (kvset.speed_up, kvset.speed_down,
kvset.replay_pause), through the real monitor; without a paced replay they say so."""

from __future__ import annotations

import pytest

from kvset.core.stack_distance import new_analyzer
from kvset.monitor import Monitor
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.replay import ReplaySource
from kvset_tui.app import KvsetTopApp
from tests.support.paths import MOONCAKE_TRACE
from tests.support.tui_snapshots import wait_until

SIZE = (120, 40)
pytestmark = pytest.mark.anyio


async def test_plus_minus_and_space_change_the_replays_speed_and_pause_it():
    source = ReplaySource(str(MOONCAKE_TRACE), speed=1.0)
    monitor = Monitor([source], new_analyzer, SnapshotBuilder(SnapshotConfig()), interval=0.2)
    app = KvsetTopApp(monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus", "plus", "plus", "minus")
        assert source.playhead is not None and source.playhead.speed == 4.0
        await pilot.press("space")
        assert source.playhead.paused and not app.view.paused  # the source, not the display
        await pilot.press("space")
        assert not source.playhead.paused
        await pilot.press("q")


async def test_without_a_paced_replay_the_keys_say_what_they_are_for():
    source = ReplaySource(str(MOONCAKE_TRACE), speed=None)
    monitor = Monitor([source], new_analyzer, SnapshotBuilder(SnapshotConfig()), interval=0.2)
    app = KvsetTopApp(monitor)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")

        def said() -> bool:  # other notices (the replay's end) may come first on a loaded machine
            return any("no paced replay" in n.message for n in app._notifications)

        await wait_until(pilot, said, timeout=10.0)
        await pilot.press("q")
