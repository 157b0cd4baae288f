"""`c`: type a capacity for the curve's cursor, in blocks (12000, 1.2e4) or bytes (40GiB: with a model)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from kvset.api import Snapshot
from kvset.api import quantities as fmt

PROMPT = "capacity for the cursor: blocks (12000, 1.2e4) or bytes (40GiB, with --model) · Esc: cancel"


def capacity_blocks(text: str, snapshot: Snapshot | None) -> int:
    """The typed capacity in blocks; ValueError with the reason it cannot be read."""
    values, unit = fmt.parse_sizes(text, "capacity")
    if len(values) != 1:
        raise ValueError(f"one capacity, got {text!r}")
    if unit == "blocks":
        return values[0]
    per_block = snapshot.bytes_per_block if snapshot is not None else None
    if not per_block:
        raise ValueError(
            "a capacity in bytes needs the model's KV geometry: start with --model, or give blocks"
        )
    return max(1, values[0] // per_block)


class CapacityPrompt(ModalScreen[int | None]):
    """One line to type a capacity in; dismissed with the capacity in blocks, or None."""

    DEFAULT_CSS = """
    CapacityPrompt { align: center middle; }
    CapacityPrompt > Vertical { width: 80%; max-width: 90; height: auto; border: round $primary; padding: 0 1; }
    CapacityPrompt #error { color: $error; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="kvset.capacity_cancel", tooltip="cancel")]

    def __init__(self, snapshot: Snapshot | None) -> None:
        super().__init__()
        self.snapshot = snapshot

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(PROMPT)
            yield Input(placeholder="e.g. 12000", id="capacity")
            yield Label("", id="error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self.dismiss(capacity_blocks(event.value, self.snapshot))
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))

    def action_cancel(self) -> None:
        self.dismiss(None)
