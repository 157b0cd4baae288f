"""kvset-top: the live terminal monitor. It renders kvset snapshots and nothing else.

The monitor (kvset.monitor) runs in a thread worker: it ingests, analyzes and publishes an
immutable Snapshot at most every `interval` seconds. Each publish posts a replaceable message, so
a slow terminal only ever draws the newest frame; panels redraw only when their part changed.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from textual import work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from kvset.api import Ranks, Snapshot, Tiers
from kvset_tui.bindings import APP_BINDINGS
from kvset_tui.capacity_prompt import CapacityPrompt
from kvset_tui.cursor import cursor_range
from kvset_tui.export import ExportPaths, export_snapshot
from kvset_tui.help_screen import HelpScreen, key_help
from kvset_tui.messages import SnapshotReady
from kvset_tui.theming import KvsetTheme, choose_theme
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.churn import ChurnPanel
from kvset_tui.widgets.curve_plot import HitRateCurvePlot
from kvset_tui.widgets.demo_banner import DemoBanner
from kvset_tui.widgets.events import EventsPanel
from kvset_tui.widgets.panel import SnapshotView
from kvset_tui.widgets.principals import PrincipalsPanel
from kvset_tui.widgets.reserve import ReservePanel
from kvset_tui.widgets.status_line import StatusLine
from kvset_tui.widgets.thrashing import ThrashingPanel
from kvset_tui.widgets.tiers import TiersPanel
from kvset_tui.widgets.working_sets import WorkingSetTable

AGE_TICK_SECONDS = 1.0
# While the display is paused nobody looks at new frames: the monitor keeps ingesting and analysing,
# but builds a snapshot only this often (building one is most of an idle monitor's CPU).
PAUSED_INTERVAL_SECONDS = 15.0
# `kill` (SIGTERM, as timeout and systemd send) and a hang-up end the app as `q` does, so the terminal
# is restored (main screen, cursor, no mouse reporting); the exit code says which signal it was.
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class MonitorLike(Protocol):
    """What the app needs from kvset.monitor.Monitor."""

    interval: float

    def run(self, stop: threading.Event, publish: Callable[[Snapshot], None]) -> None: ...

    def change_replay_speed(self, factor: float) -> list[float]: ...

    def toggle_replay_pause(self) -> list[bool]: ...


APP_CSS = """
Screen { layout: vertical; }
#top { height: 1fr; }
#side { width: 58; height: 1fr; overflow: hidden hidden; }
.panel {
    text-wrap: nowrap;
    text-overflow: ellipsis;
    border: round $primary 40%;
    border-title-color: $text;
    border-title-style: bold;
    border-subtitle-color: $text-muted;
    padding: 0 1;
}
#curve { padding: 0; }
#events { text-wrap: wrap; }  /* a long event's hint is at its end: wrap it, the oldest give way */
Screen.-narrow #side { width: 38; }
/* a wide terminal gives the side column its share, so that hints and notes are not cut */
Screen.-huge #side { width: 40%; }
Screen.-short .panel { border: none; border-top: solid $primary 40%; padding: 0; }
Screen.-short #events { display: none; }
/* --tiers: the tiers panel takes the events panel's place; on a short screen the reserve's too (the
   working sets' fits column still counts the reserve) */
#side #tiers { display: none; }
#side.-with-tiers #tiers { display: block; }
#side.-with-tiers #events { display: none; }
Screen.-short #side.-with-tiers #reserve { display: none; }
Screen.-short #thrashing.-warn { border-top: heavy $warning; }
Screen.-short #thrashing.-thrashing { border-top: heavy $error; }
Screen.-short #thrashing.-ok { border-top: solid $success; }
Screen.-narrow KvsetFooter FooterKey.-quit { dock: right; }
"""


class KvsetFooter(Footer):
    """The footer, whose quit key stays on screen when a narrow terminal cuts the others off."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if getattr(widget, "action", None) == "quit":  # a FooterKey (its class is not public)
                widget.add_class("-quit")
            yield widget


class KvsetTopApp(App[int]):
    """The live monitor. Give it a monitor to run, or a fixed snapshot to show (tests, screenshots)."""

    TITLE = "kvset-top"
    ENABLE_COMMAND_PALETTE = False
    CSS = APP_CSS
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide"), (150, "-huge")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]
    BINDINGS = APP_BINDINGS  # kvset_tui.bindings: each tooltip is its line in the help screen

    def __init__(
        self,
        monitor: MonitorLike | None = None,
        *,
        snapshot: Snapshot | None = None,
        theme_name: str | None = None,
        palette: KvsetTheme | None = None,
        view: ViewState | None = None,
        clock: Callable[[], float] = time.time,
        export_dir: Path = Path("exports"),
        keymap: dict[str, str] | None = None,
    ) -> None:
        palette = palette or choose_theme(theme_name)
        # Without colour, ANSI mode makes Textual strip colours instead of greying them.
        super().__init__(ansi_color=True if palette.monochrome else None)
        self.palette = palette
        self.register_theme(palette.textual_theme())
        self.theme = palette.textual_name
        self.monitor = monitor
        self.view = view or ViewState()
        self.clock = clock
        self.export_dir = export_dir
        self.latest: Snapshot | None = snapshot  # newest from the monitor (shown unless paused)
        self.shown: Snapshot | None = None  # what the panels show
        self.frames_received = 0
        self.frames_rendered = 0
        self.last_export: ExportPaths | None = None
        self._stop = threading.Event()
        self._monitor_worker: Worker | None = None
        self._panels: list[SnapshotView] | None = None
        self._live_interval: float | None = None
        self._has_ranks = False
        self._drawn_at = -math.inf  # the clock's time of the last frame that redrew a panel
        if keymap:
            self.set_keymap(keymap)

    # -- layout ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        p = self.palette
        yield DemoBanner(p, id="banner")
        with Horizontal(id="top"):
            yield HitRateCurvePlot(p, id="curve")
            with Vertical(id="side"):
                yield ThrashingPanel(p, id="thrashing")
                yield WorkingSetTable(p, id="working-sets")
                yield TiersPanel(p, id="tiers")
                yield PrincipalsPanel(p, id="principals")
                yield ReservePanel(p, id="reserve")
                yield EventsPanel(p, id="events")
        yield ChurnPanel(p, id="churn")
        yield StatusLine(p, clock=self.clock, id="status")
        yield KvsetFooter()

    @property
    def panels(self) -> list[SnapshotView]:
        """Every widget that renders part of the snapshot (looked up once, after compose)."""
        if self._panels is None:
            self._panels = self._query_panels()
        return self._panels

    def _query_panels(self) -> list[SnapshotView]:
        return [
            self.query_one(DemoBanner),
            self.query_one(HitRateCurvePlot),
            self.query_one(ThrashingPanel),
            self.query_one(WorkingSetTable),
            self.query_one(TiersPanel),
            self.query_one(PrincipalsPanel),
            self.query_one(ReservePanel),
            self.query_one(EventsPanel),
            self.query_one(ChurnPanel),
            self.query_one(StatusLine),
        ]

    def on_mount(self) -> None:
        self._side = self.query_one("#side")  # looked up once: frames may still arrive while the app closes
        for panel in self.panels:
            if not isinstance(panel, DemoBanner | StatusLine):
                panel.add_class("panel")
        self._render_view()
        if self.monitor is not None:
            self._monitor_worker = self._run_monitor()
        # A hung-up terminal (an SSH drop, a killed tmux pane) reads as endless EOF, which the
        # driver's input thread spins on; notice that the tty is gone and quit instead.
        self._tty_fd = _tty_fd()
        self.set_interval(AGE_TICK_SECONDS, self._tick_ages)
        self._signals = _add_signal_handlers(self.exit_on_signal)

    def exit_on_signal(self, signum: int) -> None:
        """SIGTERM or SIGHUP: stop the monitor and leave as `q` does, with the shell's 128 + signal code."""
        self._stop.set()
        self.exit(128 + signum)

    # -- the monitor thread ------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, name="monitor", group="monitor")
    def _run_monitor(self) -> None:
        assert self.monitor is not None
        self.monitor.run(self._stop, self._publish)

    def _publish(self, snapshot: Snapshot) -> None:
        """Called from the monitor thread; post_message is thread-safe."""
        self.post_message(SnapshotReady(snapshot))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._monitor_worker:
            return
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            text = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
            self.status_line.set_monitor_error(text)
            self.notify(f"monitor stopped: {text}", severity="error", timeout=10)
        elif event.state == WorkerState.SUCCESS and not self._stop.is_set():
            self.status_line.set_monitor_error("all sources finished")

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.frames_received += 1
        self.latest = message.snapshot
        if not self.view.window_chosen and self.view.window != "all" and _replay_finished(message.snapshot):
            # The whole file is read: its last minutes are not what `kvset analyze` of it reports.
            self.view = self.view.with_window("all", chosen=False)
            self.notify("replay finished: showing all time (w, 1, 5, h pick another window)", timeout=6)
        if not self.view.paused:
            self._render_view()

    # -- drawing -----------------------------------------------------------------------------
    def _render_view(self) -> None:
        """Show the newest snapshot in the current view (frozen while paused)."""
        snapshot = self.shown if self.view.paused else self.latest
        changed = False
        for panel in self.panels:
            changed |= panel.show(snapshot, self.view)
        self.shown = snapshot
        self._side.set_class(snapshot is not None and snapshot.get(Tiers) is not None, "-with-tiers")
        has_ranks = snapshot is not None and snapshot.get(Ranks) is not None
        if has_ranks != self._has_ranks:
            self._has_ranks = has_ranks
            self.refresh_bindings()
        if changed:
            self.frames_rendered += 1
            self._drawn_at = self.clock()

    @property
    def status_line(self) -> StatusLine:
        line = self.panels[-1]
        assert isinstance(line, StatusLine)  # the last panel (see panels)
        return line

    def _tick_ages(self) -> None:
        if self._tty_fd is not None and not os.isatty(self._tty_fd):
            self._stop.set()
            self.exit(0)
            return
        # A frame drawn within the last tick has put the ages on screen already (frames come once a
        # second while data flows): the tick is for the seconds between sparser frames.
        if not self.view.paused and self.clock() - self._drawn_at >= AGE_TICK_SECONDS:
            self.status_line.tick()

    def on_resize(self) -> None:
        # The -short/-narrow breakpoints change what panels include; let them redraw once.
        for panel in self.panels:
            panel.refresh()

    def _set_view(self, view: ViewState) -> None:
        self.view = view
        self._render_view()

    # -- actions -----------------------------------------------------------------------------
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(key_help(self)))

    def action_toggle_pause(self) -> None:
        view = self.view.toggle_pause()
        if self.monitor is not None:
            if view.paused:
                self._live_interval = self.monitor.interval
                self.monitor.interval = max(self._live_interval, PAUSED_INTERVAL_SECONDS)
            elif self._live_interval is not None:
                self.monitor.interval = self._live_interval
        self._set_view(view)

    def action_toggle_replay_pause(self) -> None:
        states = self.monitor.toggle_replay_pause() if self.monitor is not None else []
        if not states:
            self.notify("no paced replay to pause (p pauses the display)", timeout=3)
        else:
            self.notify("replay paused: space resumes" if states[0] else "replay resumed", timeout=3)

    def action_change_replay_speed(self, factor: float) -> None:
        speeds = self.monitor.change_replay_speed(factor) if self.monitor is not None else []
        if not speeds:
            self.notify("no paced replay: + and - change a --replay's --speed", timeout=3)
        else:
            self.notify(f"replay speed {speeds[0]:g}x", timeout=3)

    def action_cycle_window(self) -> None:
        self._set_view(self.view.next_window())

    def action_show_window(self, label: str) -> None:
        self._set_view(self.view.with_window(label))

    def action_cycle_units(self) -> None:
        view, skipped = self.view.next_unit(self.shown)
        for notice in skipped:
            self.notify(notice, severity="warning", timeout=4)
        self._set_view(view)

    def action_toggle_log(self) -> None:
        self._set_view(self.view.toggle_log())

    def action_move_cursor(self, steps: int) -> None:
        ranged = cursor_range(self.shown, self.view)
        if ranged is None:
            self.notify("no curve yet: nothing to point at", severity="warning", timeout=3)
            return
        self._set_view(self.view.move_cursor(steps, *ranged))

    def action_type_capacity(self) -> None:
        def chosen(blocks: int | None) -> None:
            if blocks is not None:
                self._set_view(self.view.with_cursor(blocks))

        self.push_screen(CapacityPrompt(self.shown), chosen)

    def action_clear_cursor(self) -> None:
        if self.view.cursor_blocks is not None:
            self._set_view(self.view.with_cursor(None))

    def action_cycle_targets(self) -> None:
        view, notice = self.view.next_target_mode(self.shown)
        if notice:
            self.notify(notice, severity="warning", timeout=4)
        self._set_view(view)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The rank key (footer and help) only while there are data-parallel ranks to choose from.
        if action == "cycle_rank":
            return self._has_ranks
        return True

    def action_cycle_rank(self) -> None:
        view, notice = self.view.next_rank(self.shown)
        if notice:
            self.notify(notice, severity="warning", timeout=4)
        self._set_view(view)

    def action_cycle_principals(self) -> None:
        if self.query_one(PrincipalsPanel).cycle_level() is None:
            self.notify("no principals: give --by tenant, session or adapter", severity="warning", timeout=4)

    def action_export(self) -> None:
        snapshot = self.shown
        if snapshot is None:
            self.notify("nothing to export yet: no snapshot", severity="warning")
            return
        for panel in self.panels:
            panel.show_pending()
        try:
            paths = export_snapshot(
                snapshot, self.export_screenshot(), self.export_dir, self.clock(), window=self.view.window
            )
        except (OSError, ValueError) as exc:  # unwritable directory; a value JSON cannot hold
            self.notify(f"export failed: {exc}", severity="error", timeout=8)
            return
        self.last_export = paths
        self.notify("exported\n" + "\n".join(str(path) for path in paths), title="Export", timeout=8)

    async def action_quit(self) -> None:
        self._stop.set()
        self.exit(0)

    def on_unmount(self) -> None:
        self._stop.set()
        _remove_signal_handlers(getattr(self, "_signals", ()))


def _replay_finished(snapshot: Snapshot) -> bool:
    """Every source is a replay, and each has read its whole file."""
    sources = snapshot.sources
    return bool(sources) and all(h.kind == "replay" and h.finished for h in sources)


def _add_signal_handlers(handler: Callable[[int], None]) -> tuple[signal.Signals, ...]:
    """Call `handler(signum)` on the event loop for each of EXIT_SIGNALS; the ones installed."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in EXIT_SIGNALS:
        try:
            loop.add_signal_handler(sig, handler, int(sig))
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal here
            continue
        installed.append(sig)
    return tuple(installed)


def _remove_signal_handlers(signals: tuple[signal.Signals, ...]) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    for sig in signals:
        loop.remove_signal_handler(sig)


def _tty_fd() -> int | None:
    """The controlling terminal's input, when the app runs in one (not under a test harness)."""
    stream = sys.__stdin__
    try:
        fd = stream.fileno() if stream is not None else None
    except (OSError, ValueError):
        return None
    return fd if fd is not None and os.isatty(fd) else None
