"""What the user chose to see: window, units, axis, target set, rank, paused. Pure values, no UI."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvset.api import TARGET_MODES, WINDOWS, Ranks, RankView, Snapshot

WINDOW_LABELS: tuple[str, ...] = tuple(label for label, _ in WINDOWS)
UNITS: tuple[str, ...] = ("blocks", "tokens", "GiB")
CURSOR_STEPS_PER_DOUBLING = 8  # a step of the curve's cursor on a log axis: an eighth of a doubling
CURSOR_LINEAR_STEPS = 40  # on a linear axis: a fortieth of the axis


def unit_missing_reason(unit: str, snapshot: Snapshot | None) -> str | None:
    """Why `unit` cannot be shown for this snapshot, or None when it can."""
    if unit == "blocks":
        return None
    if snapshot is None:
        return "no data yet"
    if unit == "tokens" and not snapshot.block_tokens:
        return "tokens need a uniform block size, and this input has none"
    if unit == "GiB" and not snapshot.bytes_per_block:
        return "GiB needs the model's KV geometry: start with --model"
    return None


@dataclass(frozen=True)
class ViewState:
    window: str = "5m"
    unit: str = "blocks"
    log_x: bool = True
    target_mode: str = "coverage"
    paused: bool = False
    rank: int | None = None  # a data-parallel rank's own cache; None: the merged stream of all ranks
    # Whether the user picked the window (a key or --window): only a window nobody chose follows the
    # stream, e.g. to all time once a replay has finished.
    window_chosen: bool = False
    cursor_blocks: int | None = None  # the capacity the curve's cursor points at; None: no cursor

    def move_cursor(self, steps: int, start: int, top: int) -> ViewState:
        """The cursor moved `steps` steps right (left when negative), within 1..top blocks; without a
        cursor yet, it appears at `start` (the pool, the knee) and the steps count from there."""
        at = float(self.cursor_blocks if self.cursor_blocks is not None else start)
        if self.cursor_blocks is not None:
            if self.log_x:
                moved = at * 2 ** (steps / CURSOR_STEPS_PER_DOUBLING)
                at = max(moved, at + 1) if steps > 0 else min(moved, at - 1)  # at least a block a step
            else:
                at += steps * max(1.0, top / CURSOR_LINEAR_STEPS)
        return replace(self, cursor_blocks=int(min(max(1, round(at)), max(1, top))))

    def with_cursor(self, blocks: int | None) -> ViewState:
        return replace(self, cursor_blocks=None if blocks is None else max(1, int(blocks)))

    def next_window(self) -> ViewState:
        i = WINDOW_LABELS.index(self.window) if self.window in WINDOW_LABELS else -1
        return self.with_window(WINDOW_LABELS[(i + 1) % len(WINDOW_LABELS)])

    def with_window(self, label: str, chosen: bool = True) -> ViewState:
        if label not in WINDOW_LABELS:
            raise ValueError(f"no such window {label!r} (windows: {', '.join(WINDOW_LABELS)})")
        return replace(self, window=label, window_chosen=chosen)

    def next_unit(self, snapshot: Snapshot | None) -> tuple[ViewState, list[str]]:
        """The next unit this snapshot can show, and a notice for each one skipped."""
        skipped: list[str] = []
        i = UNITS.index(self.unit) if self.unit in UNITS else 0
        for step in range(1, len(UNITS) + 1):
            candidate = UNITS[(i + step) % len(UNITS)]
            reason = unit_missing_reason(candidate, snapshot)
            if reason is None:
                return replace(self, unit=candidate), skipped
            skipped.append(f"{candidate} skipped: {reason}")
        return self, skipped  # not reached: blocks is always available

    def next_target_mode(self, snapshot: Snapshot | None) -> tuple[ViewState, str | None]:
        modes = [m for m in TARGET_MODES if snapshot is None or m in snapshot.targets.by_mode]
        if self.target_mode in modes and len(modes) == 1:
            return self, f"only {self.target_mode} targets are configured"
        i = TARGET_MODES.index(self.target_mode) if self.target_mode in TARGET_MODES else -1
        for step in range(1, len(TARGET_MODES) + 1):
            candidate = TARGET_MODES[(i + step) % len(TARGET_MODES)]
            if candidate in modes:
                return replace(self, target_mode=candidate), None
        return self, "no targets configured"

    def next_rank(self, snapshot: Snapshot | None) -> tuple[ViewState, str | None]:
        """merged, rank 0, rank 1, ..., merged again; a notice when the snapshot has no ranks."""
        by_rank = snapshot.get(Ranks) if snapshot is not None else None
        ranks = [r.rank for r in by_rank.views] if by_rank is not None else []
        if not ranks:
            return replace(self, rank=None), (
                "one stream, no ranks: give --events once per data-parallel rank "
                "(or a port range) to see each rank's own cache"
            )
        order: list[int | None] = [None, *ranks]
        i = order.index(self.rank) if self.rank in order else 0
        return replace(self, rank=order[(i + 1) % len(order)]), None

    def rank_view(self, snapshot: Snapshot | None) -> RankView | None:
        """The selected rank's view (None: the merged stream is shown)."""
        by_rank = snapshot.get(Ranks) if snapshot is not None else None
        return by_rank.view(self.rank) if by_rank is not None else None

    def rank_label(self, snapshot: Snapshot | None) -> str | None:
        """What the rank-aware panels show: "rank 1", "merged" (of several ranks), or None without ranks."""
        if snapshot is None or snapshot.get(Ranks) is None:
            return None
        return f"rank {self.rank}" if self.rank_view(snapshot) is not None else "merged"

    def toggle_log(self) -> ViewState:
        return replace(self, log_x=not self.log_x)

    def toggle_pause(self) -> ViewState:
        return replace(self, paused=not self.paused)

    def effective_unit(self, snapshot: Snapshot | None) -> str:
        """The chosen unit, or blocks when this snapshot cannot show it (e.g. a new source without bytes)."""
        return self.unit if unit_missing_reason(self.unit, snapshot) is None else "blocks"
