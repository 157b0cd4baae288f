"""What an engine's KV-cache events say: block accesses, its resident blocks, whether it reports hits.

Meaning of the events (kvset.engine.stream_shape first measures the stream's shape: vLLM's request
steps, one event per page, or SGLang's radix inserts; the grouping below is the one for vLLM's shape,
the others keep every page and, for SGLang, replay its radix cache: kvset.engine_model.radix_cache):
- the BlockStored events (of the selected medium and KV cache group) of one engine request are
  grouped into that request, and hit reports of lookups that were not admitted are dropped
  (kvset.engine_model.replay, which also replays vLLM's block pool on them: the engine model); a
  request's blocks are handed out as one request when it finishes, in chain order, with the
  tokens each covers (from block_size and token_ids; 0 for output blocks and readmissions, which
  the engine does not count as queries), stamped with the time of its finish;
- BlockRemoved is the engine's own eviction: it drives the engine's resident set, its churn
  and the re-stores after removal (misses a larger cache would have hit);
- AllBlocksCleared and a sequence number going backwards (engine restart) reset that rank's
  resident set and become timeline events.

Hybrid models store each request's blocks once per KV cache group, often under the same hashes.
Only one group is counted (kvset.engine.kv_cache_group_choice); each (rank, group) has its own
resident set, so one group's blocks never look like hits in another.

Whether the engine reports its hits is decided from a sustained signal: enough stores of blocks
that are already resident (kvset.engine.kv_event_readings: HITS_MIN_STORES, and HITS_MIN_SHARE of all
stores). After events were lost, the blocks resident then may have been evicted unseen, so their
next store is not taken as a hit.

`KvEventTracker` is pure: it is given each publisher's messages as frames, with the time (monotonic
seconds `now` for the replay deadlines, wall seconds `at` for the timeline), and answers with the
replay requests its source must send (see kv_event_sequence). No message can stop it: an error
while handling one is a counted rejection.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence

from kvset.engine import DEFAULT_MEDIUM
from kvset.engine.kv_cache_group_choice import GroupChoice
from kvset.engine.kv_event_principals import EventPrincipals
from kvset.engine.kv_event_publisher import Publisher, block_tokens, event_block_size
from kvset.engine.kv_event_readings import TrackerReadings
from kvset.engine.kv_event_sequence import (
    Accept,
    AskReplay,
    DropReplayConnection,
    EngineRestarted,
    EventsLost,
    GapClosed,
    KvEventSequence,
    Step,
    reject_failed_message,
)
from kvset.engine.kv_events import (
    ALL_BLOCKS_CLEARED,
    BLOCK_REMOVED,
    BLOCK_STORED,
    KvEventBatch,
    decode_message,
    decode_seq,
)
from kvset.engine.resident_set import MediaResidents, ResidentBlocks
from kvset.engine.stream_shape import ONE_EVENT_PER_PAGE, RADIX_INSERTS
from kvset.engine.tracker_output import PendingAccesses
from kvset.engine_model.radix_cache import RadixReplay
from kvset.engine_model.records import ModelPart, merge_model
from kvset.quantities import plural
from kvset.rejects import RejectCounter
from kvset.types import SourceUpdate, TimelineEvent
from kvset.units import DEFAULT_UNITS, StreamUnits

ALL_MEDIA = ("all", "any", "*")
# a publisher silent this long has finished its requests: the replay is flushed (a fast engine's
# request steps sooner: Publisher.quiet_wait)
QUIET_SECONDS = 1.0

# Of a quiet publisher's delay line (kvset.engine_model.replay), batches replayed per update: its first
# requests count after that much work (a flood's 32 batches took 0.4 s of CPU at once)
FLUSH_BATCHES = 4
ReplayStep = AskReplay | DropReplayConnection  # what only the source can do: talk to the replay socket


class KvEventTracker(TrackerReadings):
    """The engine as its KV events describe it, over one or more publishers (see the module docstring)."""

    def __init__(
        self,
        addresses: Sequence[str],
        replay_addresses: Sequence[str | None],
        rejects: RejectCounter,
        medium: str = DEFAULT_MEDIUM,
        radix_policy: str = "lru",
        group_idx: int | None = None,
        block_size: int | None = None,
        replay_timeout: float = 1.0,
        removed_memory: int = 2_000_000,
        quiet_seconds: float = QUIET_SECONDS,
        tail_probe_seconds: float | None = None,
    ) -> None:
        """block_size: the engine's tokens per block, given (--block-size), for events that do not
        carry it; the stream's units are the first counted store's (`units`). radix_policy: SGLang's
        --radix-eviction-policy, which an SGLang stream's engine model replays."""
        if block_size is not None and block_size <= 0:
            raise ValueError("block size must be positive")
        self.rejects = rejects
        self.publishers = [
            Publisher(
                address,
                KvEventSequence(replay, replay_timeout, rejects),
                radix=RadixReplay(policy=radix_policy),
            )
            for address, replay in zip(addresses, replay_addresses, strict=True)
        ]
        self.medium = None if medium.lower() in ALL_MEDIA else medium.upper()  # None: every medium
        self.given_block_size = block_size
        self.removed_memory = removed_memory
        self.quiet_seconds = quiet_seconds
        self.tail_probe_seconds = quiet_seconds if tail_probe_seconds is None else tail_probe_seconds
        self._pending = PendingAccesses()
        self.principals = EventPrincipals()  # whom each request is for, where the events say
        self._group_pending: dict[int, PendingAccesses] = {}  # a hybrid model's groups, each its own
        self._timeline: list[TimelineEvent] = []
        self.accesses = 0
        self.clears = 0
        self.units: StreamUnits | None = None  # decided by the first counted store
        self.other_block_sizes: Counter[int] = Counter()  # blocks refused: not the stream's size
        self.groups = GroupChoice(group_idx)  # the KV cache group counted, and the others
        self.ignored_media: Counter[str] = Counter()
        self.other_media = MediaResidents()  # what the media not counted hold (HiCache's lower tiers)
        self._eviction_samples: deque[tuple[float, int]] = deque()
        # what the sequences decided, in order, until applied: at once, or by the source (apply_next)
        self._decided: deque[tuple[Publisher, Accept | EventsLost | EngineRestarted | GapClosed]] = deque()
        self.apply_at_once = True

    # ----------------------------------------------------------------- inputs
    def published(self, index: int, frames: Sequence[bytes], now: float, at: float) -> list[ReplayStep]:
        """One message from publisher `index`'s socket."""
        publisher = self.publishers[index]
        publisher.last_batch_now, publisher.tail_asked = now, False
        try:
            seq, batch = decode_message(frames, self.rejects, publisher.address)
            if seq is None:
                return []
            steps = publisher.sequence.published(seq, batch, now)
        except Exception as exc:  # noqa: BLE001 - no message may stop the source
            self._failed(publisher, exc, publisher.address)
            return []
        return self._carry_out(publisher, steps, at)

    def shed(self, index: int, frames: Sequence[bytes], now: float, at: float) -> list[ReplayStep]:
        """A message from publisher `index` that its source dropped undecoded, to keep up: its sequence
        number alone is read, so that it counts as shed, not as a gap to replay."""
        publisher = self.publishers[index]
        seq = decode_seq(frames[1]) if len(frames) == 3 else None
        if seq is None:  # no number to place: it shows as a gap
            return []
        return self._carry_out(publisher, publisher.sequence.shed_batch(seq, now), at)

    def replay_reply(self, index: int, frames: Sequence[bytes], now: float, at: float) -> list[ReplayStep]:
        """One message from publisher `index`'s replay socket."""
        publisher = self.publishers[index]
        return self._carry_out(publisher, publisher.sequence.replay_reply(frames, now), at)

    def replay_unsent(self, index: int, now: float, at: float) -> list[ReplayStep]:
        """The source could not send publisher `index`'s replay request."""
        publisher = self.publishers[index]
        return self._carry_out(publisher, publisher.sequence.replay_unsent(now), at)

    def tick(self, now: float, at: float) -> list[tuple[int, ReplayStep]]:
        """Time passes: replays past their deadline are given up; a publisher gone quiet is asked, once,
        for any batch after its last (a batch lost at the end of a stream leaves no gap)."""
        out: list[tuple[int, ReplayStep]] = []
        for index, publisher in enumerate(self.publishers):
            steps = publisher.sequence.tick(now)
            quiet = (
                publisher.last_batch_now is not None
                and now - publisher.last_batch_now >= self.tail_probe_seconds
            )
            if quiet and not publisher.tail_asked:
                publisher.tail_asked = True
                steps += publisher.sequence.probe_tail(now)
            out += [(index, step) for step in self._carry_out(publisher, steps, at)]
        return out

    @property
    def replay_deadline(self) -> float | None:
        """The earliest deadline of a pending replay (monotonic seconds), or None."""
        deadlines = [p.sequence.deadline for p in self.publishers if p.sequence.deadline is not None]
        return min(deadlines) if deadlines else None

    def _carry_out(self, publisher: Publisher, steps: Iterable[Step], at: float) -> list[ReplayStep]:
        """Queue the sequence's steps for the engine's state (applied now unless `apply_at_once` is
        off); hand back those for the replay socket."""
        out: list[ReplayStep] = []
        for step in steps:
            if isinstance(step, AskReplay | DropReplayConnection):
                out.append(step)
            else:
                self._decided.append((publisher, step))
        if self.apply_at_once:
            self._apply_all(at)
        return out

    @property
    def unapplied(self) -> int:
        """Steps decided (batches accepted, gaps closed) and not yet applied to the engine's state."""
        return len(self._decided)

    @property
    def flushing(self) -> bool:
        """Whether a quiet publisher's requests are being finished, over the next updates."""
        return any(p.replay.flushing for p in self.publishers)

    @property
    def unapplied_batches(self) -> int:
        return sum(isinstance(step, Accept) for _, step in self._decided)

    def apply_next(self, at: float) -> bool:
        """Apply the next decided step to the engine's state, in the order decided; False: none waits.
        A replay that ends releases the batches it held at once: applied one by one, between the
        source's updates, the first of them count after one batch's work, not after all of theirs."""
        if not self._decided:
            return False
        publisher, step = self._decided.popleft()
        try:
            if isinstance(step, Accept):
                self._accept(publisher, step.batch, at)
            elif isinstance(step, EventsLost):
                self._events_lost(publisher)
            elif isinstance(step, EngineRestarted):
                for blocks in publisher.groups.values():
                    blocks.clear()
                publisher.reset_groupings()
                self._timeline.append(TimelineEvent(at, "engine-reset", step.describe(publisher.label)))
            elif isinstance(step, GapClosed):
                self._timeline.append(TimelineEvent(at, "sequence-gap", step.describe(publisher.label)))
        except Exception as exc:  # noqa: BLE001 - no message may stop the source
            where = publisher.address + (f" seq {step.seq}" if isinstance(step, Accept) else "")
            self._failed(publisher, exc, where)
        return True

    def _apply_all(self, at: float) -> None:
        while self.apply_next(at):
            pass

    def _failed(self, publisher: Publisher, exc: Exception, where: str) -> None:
        """A message whose handling raised: counted, and what it may have changed is not trusted."""
        reject_failed_message(self.rejects, exc, where)
        self._events_lost(publisher)

    def _events_lost(self, publisher: Publisher) -> None:
        for blocks in publisher.groups.values():
            blocks.mark_uncertain()

    # ----------------------------------------------------------------- events
    def medium_selected(self, medium: str | None) -> bool:
        return self.medium is None or (medium or DEFAULT_MEDIUM).upper() == self.medium

    def _blocks(self, publisher: Publisher, group: int) -> ResidentBlocks:
        blocks = publisher.groups.get(group)
        if blocks is None:
            blocks = publisher.groups[group] = ResidentBlocks(self.removed_memory)
        return blocks

    def rank_of(self, publisher: Publisher) -> int | None:
        """The data-parallel rank whose own cache a publisher's accesses hit: the rank its events
        carry, else its place among the endpoints (vLLM and SGLang publish rank r on port + r). None
        with a single endpoint: its accesses are the whole stream, with nothing to tell apart."""
        if len(self.publishers) == 1:
            return None
        return publisher.rank if publisher.rank is not None else self.publishers.index(publisher)

    def _accept(self, publisher: Publisher, batch: KvEventBatch, at: float) -> None:
        publisher.batches += 1
        publisher.last_batch_at, publisher.flushed = at, False
        if batch.rank is not None:
            publisher.rank = batch.rank
        if self.groups.given is None and (
            switch := self.groups.choose(publisher, batch, self.medium_selected)
        ):
            self._timeline.append(TimelineEvent(at, "kv-cache-group", switch))
        publisher.shape.begin_batch(batch.signed_hashes)
        for grouping in publisher.fed():
            grouping.begin_batch(batch.ts)
        for i in range(len(batch)):
            kind = int(batch.kinds[i])
            if kind == ALL_BLOCKS_CLEARED:
                self.clears += 1
                for blocks in publisher.groups.values():
                    blocks.clear()
                publisher.reset_groupings()
                self.other_media.clear()
                self._timeline.append(
                    TimelineEvent(
                        at,
                        "all-blocks-cleared",
                        f"{publisher.label}: engine cleared all cached blocks; its resident set was reset",
                    )
                )
                continue
            medium = batch.media[i]
            if not self.medium_selected(medium):
                name = (medium or DEFAULT_MEDIUM).upper()
                self.ignored_media[name] += 1
                if kind == BLOCK_STORED:
                    self.other_media.stored(name, batch.event_keys(i))
                elif kind == BLOCK_REMOVED:
                    self.other_media.removed(name, batch.event_keys(i))
                continue
            group = int(batch.group_idx[i])
            keys = batch.event_keys(i)
            counted = self.groups.counts(group)
            if group >= 0:
                self.groups.seen.add(group)
                if not counted and self.groups.in_use is not None:  # (None: a removal before any store)
                    self.groups.ignored_events += 1
                    if kind == BLOCK_STORED:
                        self.groups.ignored_blocks += len(keys)
                    if self.groups.given is not None:
                        continue  # the user chose a group: the others are not even tracked
                    if kind == BLOCK_STORED:
                        block_size = self.block_size or self.given_block_size or DEFAULT_UNITS.block_size
                        self.groups.learn(publisher, group, batch, i, block_size)
            # Every group keeps its own resident set, so that a later switch finds it right.
            blocks = self._blocks(publisher, group)
            copies = publisher.replay.groups.copies if counted else None  # (kvset.engine_model.block_copies)
            if kind == BLOCK_REMOVED:
                keys = keys if copies is None else copies.removed(keys)
                blocks.remove(keys)
                if counted:
                    publisher.replay.removed(keys)
                    if (radix := publisher.radix_feed()) is not None:
                        radix.removed(keys)
            elif kind == BLOCK_STORED and len(keys):
                resident = blocks.store(keys, hit_evidence=not batch.has_parent[i]).resident
                cached = bool(resident.all())
                if copies is not None:
                    copies.stored(keys, resident, cached and not batch.has_parent[i])
                if not counted:
                    if publisher.replay in publisher.fed():  # (a Mamba group's stores name its states)
                        publisher.replay.group_stored(group, keys, not batch.has_parent[i] and cached)
                    continue
                size = self._stream_block_size(
                    len(keys), int(batch.block_sizes[i]), int(batch.token_counts[i])
                )
                if size is None:
                    continue
                tokens = block_tokens(
                    len(keys), size, int(batch.token_counts[i]) if batch.block_sizes[i] else 0
                )
                parent = int(batch.parents[i]) if batch.has_parent[i] else None
                if batch.principals:
                    self.principals.stored(keys, parent, *batch.principals[i])
                publisher.shape.stored(len(keys), parent, int(keys[0]), int(keys[-1]))
                fed = publisher.fed()
                if publisher.pages in fed:
                    publisher.pages.stored(keys, tokens, parent, not self.hits_reported, size)
                if (radix := publisher.radix_feed()) is not None:
                    radix.stored(keys, tokens, parent, size)
                if publisher.replay in fed:
                    publisher.replay.stored(keys, tokens, parent, cached)

    def _stream_block_size(self, n_blocks: int, block_size: int, token_count: int) -> int | None:
        """The block size of a counted store: the first one decides the stream's units (the event's
        own size, else --block-size, else vLLM's default); a store of another size is refused and
        counted (None), never mixed into the stream."""
        said = event_block_size(n_blocks, block_size, token_count)
        if self.units is None:
            if said is not None:
                self.units = StreamUnits(said, "event")
            elif self.given_block_size is not None:
                self.units = StreamUnits(self.given_block_size, "flag")
            else:
                self.units = DEFAULT_UNITS
        size = said if said is not None else self.units.block_size
        if size != self.units.block_size:
            self.other_block_sizes[size] += n_blocks
            self.rejects.reject(
                f"blocks of another block size than the stream's {self.units.block_size} tokens: refused",
                f"a store of {plural(n_blocks, 'block')} of {size} tokens",
                count=n_blocks,
            )
            return None
        return size

    @property
    def block_size(self) -> int | None:
        """The engine's tokens per block, as its events say (None before the first counted store)."""
        return self.units.block_size if self.units is not None else None

    # ----------------------------------------------------------------- outputs
    def quiet_wait(self, publisher: Publisher) -> float:
        """How long `publisher` stays silent before its requests are finished: quiet_seconds, or less
        for a fast engine's request steps (Publisher.quiet_wait)."""
        return publisher.quiet_wait(self.quiet_seconds, self.block_size)

    @property
    def pending(self) -> int:
        """Accesses not yet handed out (of finished requests; open ones wait for their end)."""
        return len(self._pending) + sum(p.grouping().finished_blocks for p in self.publishers)

    def take(self, at: float, final: bool = False) -> SourceUpdate:
        """The accesses, the engine model, the engine reading and the timeline events since the last
        take (no health). A publisher quiet for QUIET_SECONDS (or every one, when `final`) has its
        requests finished first."""
        if final:
            self._apply_all(at)
        events, self._timeline = tuple(self._timeline), []
        parts: list[ModelPart] = []
        part_keys: list[int] = []  # each part's request's last block (-1: none)
        model_name = ""
        for publisher in self.publishers:
            replay = publisher.replay
            quiet = (
                publisher.last_batch_at is not None
                and at - publisher.last_batch_at >= self.quiet_wait(publisher)
                and not self._decided  # (its next batch may be among them)
            )
            # A gap's replay defers the finish to its end (what it brings back comes before what was
            # held); a probe of the quiet stream's tail does not: what it may bring comes after the
            # last batch anyway, and the stream's last requests waited the probe's second more.
            flushing = not publisher.flushed and (final or (quiet and not publisher.sequence.filling_gap))
            if flushing:
                publisher.pages.flush()
                if (radix := publisher.radix_feed()) is not None:
                    radix.flush()
                publisher.flushed = True
            if flushing or replay.flushing:  # (the delay line a part at a time, at the source's updates)
                replay.flush(None if final or self.apply_at_once else FLUSH_BATCHES)
            # Accesses wait while the shape is undecided; then one grouping's are kept, the others'
            # (the same pages) are let go.
            shape = publisher.shape.shape(final=final or flushing)
            if shape is None:
                continue
            publisher.settle()
            grouped = publisher.grouping()
            for grouping in (replay, publisher.pages, publisher.radix):
                if grouping is not grouped:
                    grouping.take_accesses()
            # a hybrid model's groups (vLLM's request steps only): each group's accesses beside the pool's
            in_use = self.groups.in_use
            hybrid = grouped is replay and len(replay.groups) > 0 and in_use is not None
            for keys, tokens, ts in grouped.take_accesses():
                self._pending.add_request(
                    keys, tokens, ts, rank=self.rank_of(publisher), principal=self.principals.of_request(keys)
                )
                publisher.accesses += len(keys)
                self.accesses += len(keys)
                if hybrid:
                    assert in_use is not None
                    self._group_pending.setdefault(in_use, PendingAccesses()).add_request(keys, tokens, ts)
            group_accesses = replay.take_group_accesses()
            if grouped is replay:
                for group, keys, tokens, ts in group_accesses:
                    self._group_pending.setdefault(group, PendingAccesses()).add_request(keys, tokens, ts)
            # each engine model is of the shape it was built for: vLLM's request steps, SGLang's inserts
            (vllm_parts, vllm_keys), (radix_parts, radix_keys) = (
                replay.take_model_keyed(),
                publisher.radix.take_model_keyed(),
            )
            if shape == RADIX_INSERTS:
                parts += radix_parts
                part_keys += radix_keys
                model_name = publisher.radix.name
            elif shape != ONE_EVENT_PER_PAGE:
                parts += vllm_parts
                part_keys += vllm_keys
        model = None
        if any(p.batches for p in self.publishers):
            block_size = self.block_size or self.given_block_size or DEFAULT_UNITS.block_size
            tail = (block_size - 1) / 2  # the mean tokens past a prompt's last full block
            named = self.principals.active
            model = merge_model(
                parts,
                tail,
                self.request_counts(),
                self.replay_state(),
                model_name,
                principals=[self.principals.of_key(k) for k in part_keys] if named else None,
                names=self.principals.names if named else None,
            )
        return SourceUpdate(
            accesses=self._pending.take(
                self.block_size, self.principals.names if self.principals.active else None
            ),
            engine=self.reading(at),
            events=events,
            engine_model=model,
            units=self.units,
            kv_cache_groups=self.groups.listed(self.publishers, self.block_size),
            group_accesses=tuple(
                (g, batch)
                for g, pending in sorted(self._group_pending.items())
                if (batch := pending.take(self.block_size)) is not None
            ),
        )
