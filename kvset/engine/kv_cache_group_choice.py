"""Which KV cache group of a hybrid model the curve counts, and what the events say of the others.

Hybrid models store each request's blocks once per KV cache group, often under the same hashes, so
only one group's stores are the stream's accesses: the one given with --group-idx, else the group
that says it is full attention (kv_cache_spec_kind), else the first group seen. The other groups
share the engine's pool; they are learned here so that the engine model replays them beside the
counted one (kvset.engine_model.kv_groups).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kvset.engine.kv_event_publisher import NO_GROUP, Publisher
from kvset.engine.kv_events import BLOCK_STORED, KvEventBatch
from kvset.engine_model.kv_groups import KvGroup
from kvset.types import KvCacheGroup

# kv_cache_spec_kind values of groups whose blocks hold a shared prefix's full KV state.
FULL_ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})


@dataclass
class GroupChoice:
    """The counted group (given, or chosen on the first stores) and what was seen of the others."""

    given: int | None = None  # --group-idx
    in_use: int | None = None
    seen: set[int] = field(default_factory=set)
    kinds: dict[int, str] = field(default_factory=dict)  # kv_cache_spec_kind, where the events say
    windows: dict[int, int | None] = field(default_factory=dict)  # kv_cache_spec_sliding_window
    ignored_events: int = 0
    ignored_blocks: int = 0

    def __post_init__(self) -> None:
        if self.in_use is None:
            self.in_use = self.given

    def counts(self, group: int) -> bool:
        """Whether the stores of `group` are the stream's accesses (events without a group always are)."""
        return group == NO_GROUP or group == self.in_use

    def name(self, group: int) -> str:
        kind = self.kinds.get(group)
        return f"group {group}" + (f" ({kind})" if kind else "")

    def choose(
        self, publisher: Publisher, batch: KvEventBatch, medium_selected: Callable[[str | None], bool]
    ) -> str | None:
        """Without --group-idx: pick the counted group from a batch's stores; the timeline's text when
        the choice changed mid-stream.

        The full-attention group when the events name the kinds, else the first group seen. A group
        already in use that the events call something else (sliding window, Mamba) gives way to a
        full-attention group that shows up later.
        """
        candidates: list[int] = []
        for i in range(len(batch)):
            group = int(batch.group_idx[i])
            if group < 0 or batch.kinds[i] != BLOCK_STORED or not medium_selected(batch.media[i]):
                continue
            kind = batch.spec_kinds[i]
            if kind is not None:
                self.kinds[group] = kind
            candidates.append(group)
        if not candidates:
            return None
        full = next((g for g in candidates if self.kinds.get(g) in FULL_ATTENTION_KINDS), None)
        current = self.in_use
        if current is None:
            self.in_use = candidates[0] if full is None else full
            return None
        current_kind = self.kinds.get(current)
        if full is None or current_kind is None or current_kind in FULL_ATTENTION_KINDS:
            return None
        self.in_use = full
        publisher.replay.groups.pop(full)  # (the counted group is the model's primary)
        return (
            f"{publisher.label}: counting KV cache {self.name(full)} from now on "
            f"instead of {self.name(current)} (the accesses so far came from group {current})"
        )

    def learn(self, publisher: Publisher, group: int, batch: KvEventBatch, i: int, block_size: int) -> None:
        """Another group of a hybrid model: its copies of the blocks share the engine's pool, so the
        engine model replays them beside the counted group's."""
        known = publisher.replay.groups.get(group)
        size = int(batch.block_sizes[i]) or block_size
        window = int(batch.sliding_windows[i]) or None
        kind = batch.spec_kinds[i] or self.kinds.get(group)
        if known is not None and (known.kind, known.sliding_window, known.block_size) == (kind, window, size):
            return
        publisher.replay.add_group(KvGroup(group, kind, window, size))
        self.windows[group] = window

    def listed(self, publishers: Sequence[Publisher], block_size: int | None) -> tuple[KvCacheGroup, ...]:
        """The groups the engine model replays, the counted one marked (none for a model of one group)."""
        modelled = {g.group_idx: g for p in publishers for g in p.replay.groups}
        if not modelled or self.in_use is None:
            return ()
        primary = KvCacheGroup(
            self.in_use, self.kinds.get(self.in_use), self.windows.get(self.in_use), block_size, counted=True
        )
        others = [
            KvCacheGroup(g.group_idx, g.kind, g.sliding_window, g.block_size) for g in modelled.values()
        ]
        return tuple(sorted([primary, *others], key=lambda g: g.group_idx))
