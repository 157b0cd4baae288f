"""The sequence numbers of one KV-event publisher: batches in order, gaps, replays, restarts.

A publisher (one per data-parallel rank) numbers its batches 0, 1, 2, ... A subscriber that
misses numbers asks the publisher's replay socket (DEALER -> ROUTER, vLLM's protocol) for every
batch from the first missing one; the publisher answers from its bounded buffer, one reply per
batch, and ends with END_SEQ. A number that goes back means the publisher (the engine) started
again.

`KvEventSequence` decides, from the numbers alone, what becomes of each batch: accepted in order,
held while a replay is pending, recovered by the replay or counted lost. It is a pure state
machine: it is given published batches (already decoded; None when the payload was unreadable),
the replay socket's replies and the current time (monotonic seconds) as plain values, and it
answers with steps for its caller to carry out in order. It opens no socket and reads no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvset.engine.kv_events import END_SEQ, KvEventBatch, decode_payload, decode_seq, split_replay_reply
from kvset.rejects import RejectCounter


@dataclass(frozen=True)
class Accept:
    """Apply this batch's events to the engine's state now."""

    seq: int
    batch: KvEventBatch


@dataclass(frozen=True)
class EventsLost:
    """Events are gone for good: any block resident now may have been evicted unseen."""


@dataclass(frozen=True)
class EngineRestarted:
    """The sequence went back: the engine started again, with an empty cache."""

    last_seq: int  # the last number seen before
    seq: int

    def describe(self, label: str) -> str:
        return (
            f"{label}: sequence went back from {self.last_seq} to {self.seq}: "
            "engine restarted; its resident set was reset"
        )


@dataclass(frozen=True)
class AskReplay:
    """Ask the replay endpoint for every batch from `start` on."""

    start: int


@dataclass(frozen=True)
class DropReplayConnection:
    """A replay was given up: late replies to it must not be taken for the next replay's."""


@dataclass(frozen=True)
class GapClosed:
    """How one sequence gap (or one batch that arrived unreadable) ended."""

    start: int  # first missing sequence number
    stop: int  # the number that revealed the gap (exclusive)
    recovered: int
    replayed: bool  # False: no replay endpoint to ask
    timed_out: bool = False
    unreadable: bool = False  # one batch that arrived in sequence but unreadable
    unreadable_again: bool = False  # ... and its replayed copy was unreadable too

    @property
    def missing(self) -> int:
        return self.stop - self.start

    @property
    def lost(self) -> int:
        return self.missing - self.recovered

    def describe(self, label: str) -> str:
        if not self.replayed:
            return f"{label}: {self.missing} batches lost (seq {self.start}..{self.stop - 1}); no replay endpoint"
        why = " (replay timed out)" if self.timed_out and self.lost else ""
        if self.unreadable:
            outcome = "recovered by replay" if self.recovered else f"lost{why}"
            if self.unreadable_again:
                outcome += " (its replayed copy is unreadable too: such batches are not asked for again)"
            return f"{label}: seq {self.start} unreadable: {outcome}"
        return (
            f"{label}: {self.missing} batches missing (seq {self.start}..{self.stop - 1}): "
            f"{self.recovered} recovered by replay, {self.lost} lost{why}"
        )


Step = Accept | EventsLost | EngineRestarted | AskReplay | DropReplayConnection | GapClosed


def reject_failed_message(rejects: RejectCounter, exc: Exception, where: str) -> None:
    """A message whose handling raised: a counted rejection (no message may stop the source)."""
    rejects.reject(f"undecodable message: {type(exc).__name__}", f"{where}: {exc}")


TAIL_PROBE_BATCHES = 10_000  # a probe of a quiet stream takes at most this many batches


@dataclass
class _Replay:
    start: int
    stop: int | None  # None: a probe of a quiet stream's tail (whatever came after `start`)
    deadline: float
    unreadable: bool  # asked again for one batch that arrived unreadable (already rejected once)
    got: dict[int, bytes] = field(default_factory=dict)


class KvEventSequence:
    """One publisher's sequence numbers (see the module docstring)."""

    def __init__(self, replay_address: str | None, replay_timeout: float, rejects: RejectCounter) -> None:
        self.replay_address = replay_address  # None: gaps cannot be recovered
        self.replay_timeout = replay_timeout
        self.rejects = rejects
        self.expected: int | None = None  # the next sequence number
        self.first_seq: int | None = None
        self._replay: _Replay | None = None
        self._held: deque[tuple[int, KvEventBatch | None]] = deque()  # waiting for the replay
        # False once a batch asked again came back just as unreadable: the publisher itself sends such
        # bytes, and asking again for each would make it resend its replay buffer every time.
        self.retry_unreadable = True
        self.gaps = 0
        self.missing = 0
        self.recovered = 0
        self.lost = 0
        self.restarts = 0
        self.tail_probes = 0

    @property
    def can_replay(self) -> bool:
        return self.replay_address is not None

    @property
    def replaying(self) -> bool:
        return self._replay is not None

    @property
    def deadline(self) -> float | None:
        """When the pending replay is given up (monotonic seconds), or None."""
        return None if self._replay is None else self._replay.deadline

    @property
    def being_replayed(self) -> int:
        """Batches the pending replay is waiting for."""
        if self._replay is None or self._replay.stop is None:  # (a tail probe waits for none it knows of)
            return 0
        return self._replay.stop - self._replay.start

    @property
    def last_seq(self) -> int | None:
        return None if self.expected is None else self.expected - 1

    # ----------------------------------------------------------------- inputs
    def published(self, seq: int, batch: KvEventBatch | None, now: float) -> list[Step]:
        """One batch from the publisher socket (None: its payload was unreadable)."""
        if self._replay is not None and self._replay.stop is None:
            # the stream goes on: the tail probe is moot (a gap now shows as one)
            self._replay = None
            return [DropReplayConnection(), *self._place(seq, batch, now)]
        if self._replay is not None:
            self._held.append((seq, batch))
            return []
        return self._place(seq, batch, now)

    def replay_reply(self, frames: Sequence[bytes], now: float) -> list[Step]:
        """One message from the replay socket: a replayed batch, or the end marker."""
        replay = self._replay
        if replay is None:
            return []  # a late reply to a replay that was given up
        try:
            seq_frame, payload = split_replay_reply(frames)
        except ValueError as exc:
            self.rejects.reject("replay: malformed reply", f"{self.replay_address}: {exc}")
            return []
        if seq_frame == END_SEQ:
            return self._finish(timed_out=False, now=now)
        seq = decode_seq(seq_frame)
        if seq is None:
            self.rejects.reject("replay: sequence frame is not 8 bytes", str(self.replay_address))
        elif replay.start <= seq < (replay.stop if replay.stop is not None else replay.start + TAIL_PROBE_BATCHES):
            replay.got.setdefault(seq, payload)
        return []

    def tick(self, now: float) -> list[Step]:
        """Time passes: a replay past its deadline is given up."""
        if self._replay is not None and now >= self._replay.deadline:
            return self._finish(timed_out=True, now=now)
        return []

    def probe_tail(self, now: float) -> list[Step]:
        """The stream went quiet: ask for any batch after the last one seen. A batch lost at the very
        end of a stream leaves no gap to notice; the engine's replay buffer may still hold it."""
        if not self.can_replay or self._replay is not None or self.expected is None:
            return []
        self.tail_probes += 1
        return self._start_replay(self.expected, None, now)

    def replay_unsent(self, now: float) -> list[Step]:
        """The replay request could not be sent: the replay is given up at once."""
        return [] if self._replay is None else self._finish(timed_out=True, now=now)

    # ----------------------------------------------------------------- the protocol
    def _place(self, seq: int, batch: KvEventBatch | None, now: float) -> list[Step]:
        """Place one batch in the sequence: accept it, recover a gap, or restart."""
        if self.expected is None:
            self.first_seq = self.expected = seq
        if seq == self.expected:
            if batch is not None:
                self.expected = seq + 1
                return [Accept(seq, batch)]
            if self.can_replay and self.retry_unreadable:
                # Cut short on the way: the engine's replay buffer still holds it whole.
                self.gaps += 1
                self.missing += 1
                return self._start_replay(seq, seq + 1, now, unreadable=True)
            self.expected = seq + 1  # its number is used; its events are gone
            return [EventsLost()]
        if batch is None:
            return []  # an unreadable payload out of sequence: its number is not trusted
        steps: list[Step] = []
        if seq < self.expected:
            self.restarts += 1
            steps.append(EngineRestarted(self.expected - 1, seq))
            self.expected = 0
            if seq == 0:
                self.expected = 1
                steps.append(Accept(seq, batch))
                return steps
        start = self.expected
        self.gaps += 1
        self.missing += seq - start
        if not self.can_replay:
            self.lost += seq - start
            self.expected = seq + 1
            steps += [GapClosed(start, seq, recovered=0, replayed=False), EventsLost(), Accept(seq, batch)]
            return steps
        self._held.appendleft((seq, batch))
        steps += self._start_replay(start, seq, now)
        return steps

    def _start_replay(self, start: int, stop: int | None, now: float, unreadable: bool = False) -> list[Step]:
        self._replay = _Replay(start, stop, now + self.replay_timeout, unreadable)
        return [AskReplay(start)]

    def _finish(self, timed_out: bool, now: float) -> list[Step]:
        """The replay ended or was given up: accept what came back, count the rest, release the held."""
        replay = self._replay
        assert replay is not None
        self._replay = None
        steps: list[Step] = [DropReplayConnection()] if timed_out else []
        if replay.stop is None:  # a tail probe: what came back is a gap at the end, recovered
            if not replay.got:
                return steps + self._release_held(now)
            replay.stop = max(replay.got) + 1
            self.gaps += 1
            self.missing += replay.stop - replay.start
        # A batch that was unreadable when published has been rejected once already.
        rejects = RejectCounter() if replay.unreadable else self.rejects
        recovered = 0
        for seq in sorted(replay.got):
            where = f"{self.replay_address} seq {seq}"
            try:
                batch = decode_payload(replay.got[seq], rejects, where)
            except Exception as exc:  # noqa: BLE001 - no message may stop the source
                reject_failed_message(self.rejects, exc, where)
                steps.append(EventsLost())
                continue
            if batch is not None:
                steps.append(Accept(seq, batch))
                recovered += 1
        missing = replay.stop - replay.start
        self.recovered += recovered
        self.lost += missing - recovered
        if recovered < missing:
            steps.append(EventsLost())
        self.expected = replay.stop
        again = replay.unreadable and bool(replay.got) and not recovered
        if again:
            self.retry_unreadable = False
        steps.append(
            GapClosed(
                replay.start,
                replay.stop,
                recovered,
                replayed=True,
                timed_out=timed_out,
                unreadable=replay.unreadable,
                unreadable_again=again,
            )
        )
        return steps + self._release_held(now)

    def _release_held(self, now: float) -> list[Step]:
        steps: list[Step] = []
        while self._held and self._replay is None:
            seq, batch = self._held.popleft()
            steps += self._place(seq, batch, now)
        return steps
