"""What a KV-event tracker's state reads as: the engine's resident blocks and evictions, whether it
reports its hits, the request grouping's counters. A mixin of kvset.engine.kv_event_tracker's
KvEventTracker, whose publishers it reads."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable

from kvset.engine.kv_cache_group_choice import GroupChoice
from kvset.engine.kv_event_publisher import Publisher
from kvset.engine.resident_set import MediaResidents, ResidentBlocks
from kvset.types import EngineReading

# "Hits reported" needs this many stores of resident blocks, and this share of all stores: one
# stray duplicate (a lost BlockRemoved, a second KV cache group) must not decide it.
HITS_MIN_STORES = 10
HITS_MIN_SHARE = 0.01
_RATE_WINDOW_S = 10.0


class TrackerReadings:
    """Counters and readings over the tracker's publishers."""

    publishers: list[Publisher]
    groups: GroupChoice
    medium: str | None
    other_media: MediaResidents
    _eviction_samples: deque[tuple[float, int]]

    @property
    def block_size(self) -> int | None:
        raise NotImplementedError

    def request_counts(self) -> dict[str, int]:
        """The grouping's and the dedupe's counters, summed over the publishers."""
        total: Counter[str] = Counter()
        for p in self.publishers:
            total.update(vars(p.grouping().counts))
        return dict(total)

    def replay_state(self) -> dict[str, int]:
        """The replays' blocks now, summed over the publishers (the finish lag: the longest)."""
        total: Counter[str] = Counter()
        for p in self.publishers:
            total.update(p.grouping().state())
        total["finish_lag"] = max(p.grouping().finish_lag for p in self.publishers)
        return dict(total)

    def reading(self, at: float) -> EngineReading | None:
        if not any(p.batches for p in self.publishers):
            return None
        return EngineReading(
            at=at,
            block_size=self.block_size,
            resident_blocks=self.counted_total(len),
            evictions_total=self.evictions_total,
            restores_after_removal=self.counted_total(lambda b: b.restores_after_removal),
            resident_by_medium=self._resident_by_medium(),
            label="kv events",
        )

    def _resident_by_medium(self) -> tuple[tuple[str, int], ...] | None:
        """Pages resident in the counted medium, then in each other one the events showed (None: one
        medium only)."""
        others = self.other_media.counts()
        if not others or self.medium is None:
            return None
        return ((self.medium, self.counted_total(len)), *others)

    def counted_sets(self, publisher: Publisher) -> list[ResidentBlocks]:
        """The resident sets whose blocks are accesses: events without a group, and the group in use."""
        return [b for g, b in publisher.groups.items() if self.groups.counts(g)]

    def counted_total(
        self, count: Callable[[ResidentBlocks], int], publishers: Iterable[Publisher] | None = None
    ) -> int:
        return sum(
            count(b)
            for p in (self.publishers if publishers is None else publishers)
            for b in self.counted_sets(p)
        )

    @property
    def evictions_total(self) -> int:
        return self.counted_total(lambda b: b.evictions_total)

    def hit_evidence(self) -> tuple[int, int]:
        """(stores of blocks known to be resident, all stores) of the counted groups."""
        return (
            self.counted_total(lambda b: b.stores_of_resident),
            self.counted_total(lambda b: b.stored_total),
        )

    @property
    def hits_reported(self) -> bool:
        """Whether the engine's stores include its hits: a sustained share of stores of resident blocks."""
        resident, stored = self.hit_evidence()
        return resident >= HITS_MIN_STORES and resident >= HITS_MIN_SHARE * stored

    def eviction_rate(self, at: float) -> float:
        """Evictions per second over about the last _RATE_WINDOW_S seconds (each call is a sample)."""
        samples = self._eviction_samples
        samples.append((at, self.evictions_total))
        while len(samples) > 2 and at - samples[1][0] >= _RATE_WINDOW_S:
            samples.popleft()
        (t0, e0), (t1, e1) = samples[0], samples[-1]
        return (e1 - e0) / (t1 - t0) if t1 > t0 else 0.0
