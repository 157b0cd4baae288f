"""Messages from the monitor thread to the UI."""

from __future__ import annotations

from textual.message import Message

from kvset.api import Snapshot


class SnapshotReady(Message):
    """The monitor published a new snapshot.

    Replaceable: when the UI falls behind (a slow terminal over SSH), a newer snapshot waiting
    in the queue supersedes this one, so only the latest frame is ever rendered.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotReady)
