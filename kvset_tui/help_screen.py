"""The `?` help screen: what each panel means, the keys, and the caveats that go with every number."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kvset.report.caveats import CAVEATS, WINDOWED_CURVES

PANELS = (
    ("LRU hit rate vs capacity",
     "The hit rate an LRU cache of each capacity would have had on this traffic (Mattson stack "
     "distances: an access hits iff its stack distance is at most the capacity). ⣿ all time (exact), "
     "· the chosen window, │ the working set of each target, ◆ the engine's own capacity and its "
     "measured token hit rate. In tokens and GiB the curve is the token hit rate, as engines report."),
    ("Working sets",
     "The smallest capacity reaching each target: coverage = share of the attainable (infinite-cache) "
     "hits, absolute = share of all accesses. 'not reached' means not inside the tracked horizon. "
     "trend = the working set over recent windows (↑ growing); fits = inside the engine's pool."),
    ("Thrashing",
     "At the engine's capacity (or the main working set without an engine): the hit rate gained by "
     "+10 % and +25 % capacity, and the near-miss share: misses whose stack distance is within 1.25× "
     "the capacity. Many near misses means a slightly larger cache would hit them: the cache thrashes. "
     "Levels: OK below 10 % near misses, WARN from 10 %, THRASHING from 25 %. With an engine that reports "
     "its hit rate, its measured token hit rate is shown beside the LRU prediction at its capacity."),
    ("Page churn",
     "Per time slot, newest on the right: block accesses/s, first-time blocks/s (never seen before), "
     "re-references/s (hits inside the horizon), the hit rate at the engine's capacity, and the working "
     "set of the main target over time."),
    ("Reserve",
     "Full-attention working set (bytes, from the model geometry) plus the reserve hybrid layers need "
     "per running request (sliding window, linear attention, SSM state) times the concurrency, against "
     "the engine's pool. Needs --model."),
    ("Events",
     "The timeline of what happened to the sources and the engine, newest last: engine restarts and "
     "AllBlocksCleared, sequence gaps and what the replay recovered, log rotation and truncation, KV "
     "cache group changes, failed sources and the demo's phase changes."),
    ("Status line",
     "Each source: connected (●) or not (○), its state, the age of its last data, accesses delivered and "
     "input rejected (with the main reason). Then the ingest rate, horizon, window, units and PAUSED."),
)


def help_text(keys: list[tuple[str, str]]) -> Text:
    """The help page: the keys first (so they show at 80x24), then the panels, then the caveats.

    keys: (key as displayed, what it does), read off the app's live bindings so a user key map
    shows the keys that really work.
    """
    out = Text()
    out.append("kvset-top", style="bold")
    out.append(": how much KV cache buys which prefix-cache hit rate, live. Every number carries its unit "
               "and its window.\n\n")
    out.append("Keys\n", style="bold underline")
    for key, meaning in keys:
        out.append(f" {key} ", style="bold reverse")
        out.append(f" {meaning}\n")
    out.append(" esc ", style="bold reverse")
    out.append(" close this help\n")
    out.append("\nPanels\n", style="bold underline")
    for name, meaning in PANELS:
        out.append(f"{name}: ", style="bold")
        out.append(meaning + "\n")
    out.append("\nCaveats\n", style="bold underline")
    for caveat in (*CAVEATS, WINDOWED_CURVES):
        out.append(f"{caveat.name}: ", style="bold")
        out.append(caveat.long + "\n")
    return out


def key_help(app: App) -> list[tuple[str, str]]:
    """The app's own keys as they are bound now (after any key map), with what each does."""
    order = {b.id: i for i, b in enumerate(app.BINDINGS) if isinstance(b, Binding)}
    rows = []
    for active in app.active_bindings.values():
        binding = active.binding
        if active.node is not app or binding.system or binding.id not in order:
            continue
        rows.append((order[binding.id], app.get_key_display(binding), binding.tooltip or binding.description))
    return [(key, meaning) for _, key, meaning in sorted(rows)]


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96%; max-width: 110; height: 92%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="help.close"),
        Binding("question_mark", "close", "Close", show=False, id="help.toggle"),
        Binding("q", "close", "Close", show=False, id="help.quit"),
    ]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "Help"
            yield Static(help_text(self.keys), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
