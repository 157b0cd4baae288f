"""The `?` help screen: what each panel means, the keys, and the caveats that go with every number."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kvset.api import CAVEATS, THRASHING_RULE, WINDOWED_CURVES

PANELS = (
    (
        "LRU hit rate vs capacity",
        "The hit rate an LRU cache of each capacity would have had on this traffic (Mattson stack "
        "distances: an access hits iff its stack distance is at most the capacity). ⣿ all time (exact), "
        "· the chosen window, │ a vertical line at the working set of each target (labelled with its target) "
        "and at the engine's pool (labelled pool), ◆ the engine's own capacity and its measured token hit "
        "rate. The axis runs from a little below where the curve starts to rise to past the largest working "
        "set and the pool. In tokens and GiB the curve is the token hit rate, as engines report.",
    ),
    (
        "Working sets",
        "The smallest capacity reaching each target, in the window the title names: coverage = share of the "
        "attainable (infinite-cache) hits, absolute = share of all accesses. 'not reached' means not inside "
        "the tracked horizon; 'no data' that the window holds no access yet. trend = the working set over "
        "recent windows (↑ growing). fits: with --model, the working set plus the hybrid reserve within the "
        "engine's pool (the reserve panel's sum); without a model, the working set within the pool; the line "
        "under the table says which.",
    ),
    (
        "Ranks",
        "With several --events endpoints (data-parallel ranks, each with its own cache) the rank key cycles "
        "the curve and the working sets through the merged stream of all ranks (what one shared pool would "
        "see) and each rank's own accesses (all time only; the title says which). The working sets' bottom "
        "line gives the pooling gain: the merged stream's hit rate on one pool as large as the ranks' pools "
        "together, minus the ranks' own hits at their own pools over all accesses (each rank's pool: the "
        "engine's pool split evenly, or --capacity). Thrashing, churn and the windows are of the merged stream.",
    ),
    (
        "Thrashing",
        "At the engine's pool (or --capacity): what more capacity would buy. The hit rate gained by +10 % and "
        "+25 % capacity; re-stores, the share of accesses to a block the cache held before and removed (the "
        "misses that capacity alone causes); near misses, the share of misses whose stack distance is within "
        "1.25× the capacity. A thrashing cache keeps removing what it needs next, so a little more memory buys "
        "a lot: " + THRASHING_RULE + " (near misses judge nothing: a healthy cache with few misses can have "
        "most of them near). Its figures are over the chosen window; in tokens and GiB the token hit rates. "
        "Without an engine capacity or --capacity it is not judged. With an engine that reports its hit rate, "
        "its measured token hit rate is "
        "shown beside the LRU prediction at its pool, in the same window.",
    ),
    (
        "Page churn",
        "Per time slot of the data's own clock (trace time in a replay or the demo), newest on the right: "
        "block accesses/s, first-time blocks/s (never seen before), re-references/s (hits inside the "
        "horizon), the block hit rate of each slot's accesses at the engine's pool (hit/1 s), and the "
        "working set of the main target of the accesses in each whole clock minute (slot WS .../1 min; the "
        "newest slot is still filling, so its figure is of fewer accesses): not the Working sets panel's "
        "1m window, which slides over the last 60 seconds. With only --metrics: the engine's own hit rate and KV use over time.",
    ),
    (
        "Tiers",
        "With --tiers: each cache tier's size (in the chosen unit) and the share of all accesses (blocks and "
        "tokens) it serves, read off the all-time curve as exclusive tiers (one LRU cut into consecutive "
        "pieces) or inclusive ones (each tier its own LRU of its size); the misses left, in the title; with "
        "--size-next-tier, the smallest tier to add behind them for the main target. ≥ marks a tier that "
        "ends beyond the horizon (a lower bound). The tiers take the Events panel's place, and on short "
        "screens the Reserve panel's (the working sets' fits column still counts the reserve).",
    ),
    (
        "Reserve",
        "Full-attention working set of the main target over all time (bytes, from the model geometry) plus "
        "the reserve hybrid layers need per running request (sliding window, linear attention, SSM state) "
        "times the concurrency, against the engine's pool. Needs --model.",
    ),
    (
        "Events",
        "The timeline of what happened to the sources and the engine, newest first: engine restarts and "
        "AllBlocksCleared, sequence gaps and what the replay recovered, log rotation and truncation, KV "
        "cache group changes, failed sources and the demo's phase changes.",
    ),
    (
        "Status line",
        "Each source: connected (●), not (○) or finished (◼), its state, the age of its last data, accesses "
        "delivered and input rejected (with the main reason). Then the ingest rate (accesses per wall-clock "
        "second), window, units, axis, targets, horizon and PAUSED.",
    ),
    (
        "MIN (--opt)",
        "With --replay FILE --opt, once the whole file has been replayed: • the curve of Belady MIN (on a miss "
        "with a full cache, evict the block used again farthest ahead; it needs the future, so only a whole "
        "file has it), all time, computed in one pass. MIN is never below LRU at any capacity, so the gap "
        "between the curves is what LRU's policy costs, not the capacity: the working sets' MIN column is the "
        "smallest capacity at which MIN reaches the same target (all window), and their bottom line compares "
        "both hit rates at the engine's pool or --capacity.",
    ),
)


def help_text(keys: list[tuple[str, str]]) -> Text:
    """The help page: the keys first (so they show at 80x24), then the panels, then the caveats.

    keys: (key as displayed, what it does), read off the app's live bindings so a user key map
    shows the keys that really work.
    """
    out = Text()
    out.append("kvset-top", style="bold")
    out.append(
        ": how much KV cache buys which prefix-cache hit rate, live. Every number carries its unit "
        "and its window.\n\n"
    )
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
