"""The sequence numbers of one KV-event publisher: batches in order, gaps, replays, restarts.

A publisher (one per data-parallel rank) numbers its batches 0, 1, 2, ... A subscriber that
misses numbers asks the publisher's replay socket (DEALER -> ROUTER, vLLM's protocol) for every
batch from the first missing one; the publisher answers from its bounded buffer, one reply per
batch, and ends with END_SEQ. A number that goes back means the publisher (the engine) started
again.

`KvEventSequence` decides, from the numbers alone, what becomes of each batch: accepted in order,
held while a replay is pending, recovered by the replay, counted lost, or refused as a bad frame.
It is a pure state machine: it is given published batches (already decoded; None when the payload
was unreadable), the replay socket's replies and the current time (monotonic seconds) as plain
values, and it answers with steps for its caller to carry out in order. It opens no socket and
reads no clock.

Implausible numbers are not taken on trust. A number that jumps forward by more than
SUSPECT_JUMP (vLLM's replay buffer holds 10,000 batches; a gap larger than that cannot be
recovered anyway), or goes back to one above SUSPECT_JUMP (an engine starts again at 0, and a
subscriber that reconnects sees it a few batches in at most), is held until the next batch. If the next one follows it (its number + 1) and does not continue the old
sequence, the jump was real: a gap or a restart, handled as usual. Otherwise it was a bad frame:
refused and counted, and the sequence goes on as if it had never come. So one frame numbered
2**62 costs that frame only, not "4.6e18 batches lost" and a false restart.

Waiting for a replay is bounded in time and in memory, and never chained. At most MAX_HELD
batches, and at most MAX_HELD_BYTES of them decoded, are held while a replay is pending; one more
gives the replay up (a count of batches alone let 4,096 batches of 10,000 blocks pile up). The
caller gives the replay up at its deadline even while batches keep arriving (`tick`). When a replay times out
(or is given up), the gaps found among the batches held during that wait are counted lost at once
instead of starting another wait: otherwise, with gaps more often than the timeout, each wait
would hold the batches that reveal the next one and the stream would fall further behind with
every gap. After a replay that got no answer at all (not a batch, not the end marker), so are the
gaps found within one stated wait (the timeout) after it: a gap just after the release would
otherwise hold the stream again at once, and the first figures of a stream whose endpoint is dead
waited two timeouts back to back. Two such replays in a row pause replays for UNANSWERED_PAUSE_S:
the gaps found meanwhile are counted lost at once and their batches analysed without a wait, so a
dead replay endpoint costs two timeouts per pause, not one per gap, and never two in a row. After
the pause the next gap asks again. Every batch is accepted, held (and shown as
held), recovered, counted lost, or rejected with its reason.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kvset.engine.kv_events import END_SEQ, KvEventBatch, decode_payload, decode_seq, split_replay_reply
from kvset.quantities import format_bytes, plural
from kvset.rejects import RejectCounter

SUSPECT_JUMP = 10_000  # vLLM's default replay buffer (buffer_steps)
MAX_HELD = 4096  # batches held while a replay is pending
MAX_HELD_BYTES = 2 << 20  # their decoded size (about 25 batches of 10,000 blocks: seconds to analyse)
# After UNANSWERED_IN_A_ROW replays that got no answer at all, gaps are counted lost at once for
# UNANSWERED_PAUSE_S, without a wait: an endpoint that never answers would otherwise hold the batches
# after every gap for the timeout. (One unanswered replay alone may be a slow moment.)
UNANSWERED_IN_A_ROW = 2
UNANSWERED_PAUSE_S = 10.0
IMPLAUSIBLE_REASON = "sequence number jumps and the next batch does not follow it: batch refused"


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
    not_asked: bool = False  # found among the batches held during a replay that went unanswered
    held_full: bool = False  # given up because MAX_HELD batches (or MAX_HELD_BYTES) arrived during the wait

    @property
    def missing(self) -> int:
        return self.stop - self.start

    @property
    def lost(self) -> int:
        return self.missing - self.recovered

    def describe(self, label: str) -> str:
        span = f"seq {self.start}..{self.stop - 1}"
        if self.not_asked:
            return (
                f"{label}: {plural(self.missing, 'batch', 'batches')} lost ({span}); found while the "
                "replay endpoint did not answer, so not asked again"
            )
        if not self.replayed:
            return f"{label}: {plural(self.missing, 'batch', 'batches')} lost ({span}); no replay endpoint"
        why = ""
        if self.held_full and self.lost:
            why = (
                f" (replay given up: {MAX_HELD:,} batches, or {format_bytes(MAX_HELD_BYTES, 0)} of "
                "batches arrived while waiting)"
            )
        elif self.timed_out and self.lost:
            why = " (replay timed out)"
        if self.unreadable:
            outcome = "recovered by replay" if self.recovered else f"lost{why}"
            if self.unreadable_again:
                outcome += " (its replayed copy is unreadable too: such batches are not asked for again)"
            return f"{label}: seq {self.start} unreadable: {outcome}"
        return (
            f"{label}: {plural(self.missing, 'batch', 'batches')} missing ({span}): "
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
        self._held_bytes = 0  # their decoded size
        # False once a batch asked again came back just as unreadable: the publisher itself sends such
        # bytes, and asking again for each would make it resend its replay buffer every time.
        self.retry_unreadable = True
        self._suspect: tuple[int, KvEventBatch] | None = None  # an implausible number, until the next batch
        self._after_unanswered = False  # releasing the batches held during a replay that went unanswered
        self.paused_until: float | None = None  # replays paused after unanswered ones (monotonic s)
        # gaps found before this are not waited for: one stated wait after a replay that got no word
        # back, so that unanswered replays in a row do not hold the stream back to back
        self.unanswered_until: float | None = None
        self._unanswered = 0  # replays in a row that got no answer at all
        self.pauses = 0  # times replays were paused
        self.gaps = 0
        self.missing = 0
        self.recovered = 0
        self.lost = 0
        self.restarts = 0
        self.tail_probes = 0
        self.refused = 0  # batches refused for an implausible number
        self.shed = 0  # batches the source dropped unread to keep up (load shedding), not asked again
        self._shed_seqs: set[int] = set()  # ... their numbers, until their place in the sequence comes

    @property
    def can_replay(self) -> bool:
        return self.replay_address is not None

    @property
    def replaying(self) -> bool:
        return self._replay is not None

    @property
    def filling_gap(self) -> bool:
        """Whether a replay of a gap is pending (not a probe of a quiet stream's tail)."""
        return self._replay is not None and self._replay.stop is not None

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

    @property
    def held(self) -> int:
        """Batches received and not yet decided: held for the pending replay or a sequence check."""
        return len(self._held) + (self._suspect is not None)

    @property
    def suspect_seq(self) -> int | None:
        """The implausible number waiting for the next batch to confirm it, if any."""
        return None if self._suspect is None else self._suspect[0]

    def replay_allowed(self, now: float) -> bool:
        """Whether a gap found now is asked of the replay endpoint: not one found among the batches
        held while the last replay went unanswered, nor within one stated wait after a replay that
        got no answer at all, nor while replays are paused after such replays in a row."""
        paused = any(
            until is not None and now < until for until in (self.paused_until, self.unanswered_until)
        )
        return self.can_replay and not self._after_unanswered and not paused

    # ----------------------------------------------------------------- inputs
    def published(self, seq: int, batch: KvEventBatch | None, now: float) -> list[Step]:
        """One batch from the publisher socket (None: its payload was unreadable)."""
        if self._replay is not None and self._replay.stop is None:
            # the stream goes on: the tail probe is moot (a gap now shows as one)
            self._replay = None
            return [DropReplayConnection(), *self._place(seq, batch, now)]
        if self._replay is not None:
            self._hold(seq, batch, last=True)
            if len(self._held) >= MAX_HELD or self._held_bytes >= MAX_HELD_BYTES:
                return self._finish(timed_out=True, now=now, held_full=True)  # the wait holds too much
            return []
        return self._place(seq, batch, now)

    def shed_batch(self, seq: int, now: float) -> list[Step]:
        """A batch its source dropped unread, to keep up with the publisher: its events are lost, but
        its number is known, so it is no gap to ask the replay endpoint for (that would bring it back
        to a source that has no time for it)."""
        self.shed += 1
        if len(self._shed_seqs) >= MAX_HELD:  # numbers never placed (out of sequence): not kept for ever
            self._shed_seqs.clear()
        self._shed_seqs.add(seq)
        return self.published(seq, None, now)

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
        elif (
            replay.start
            <= seq
            < (replay.stop if replay.stop is not None else replay.start + TAIL_PROBE_BATCHES)
        ):
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
        if not self.replay_allowed(now) or self._replay is not None or self.expected is None:
            return []  # (nor while replays are paused: the endpoint did not answer the last ones)
        self.tail_probes += 1
        return self._start_replay(self.expected, None, now)

    def replay_unsent(self, now: float) -> list[Step]:
        """The replay request could not be sent: the replay is given up at once."""
        return [] if self._replay is None else self._finish(timed_out=True, now=now)

    def _forget_shed(self, start: int, stop: int, recovered: Mapping[int, object] | None = None) -> int:
        """The shed numbers in [start, stop) not `recovered`, which a gap there must not count lost
        again; all of the range's are forgotten."""
        inside = [q for q in self._shed_seqs if start <= q < stop]
        self._shed_seqs.difference_update(inside)
        return sum(1 for q in inside if recovered is None or q not in recovered)

    # ----------------------------------------------------------------- the protocol
    def _place(self, seq: int, batch: KvEventBatch | None, now: float) -> list[Step]:
        """Place one batch in the sequence: accept it, recover a gap, restart, or hold it for a check."""
        if self._suspect is not None:
            return self._judge_suspect(seq, batch, now)
        if self.expected is None:
            self.first_seq = self.expected = seq
        shed = batch is None and seq in self._shed_seqs
        if seq <= self.expected:  # a shed number ahead of a gap stays known until the gap is counted
            self._shed_seqs.discard(seq)
        if seq == self.expected:
            if batch is not None:
                self.expected = seq + 1
                return [Accept(seq, batch)]
            if shed:
                self.expected = seq + 1
                return [EventsLost()]
            if self.replay_allowed(now) and self.retry_unreadable:
                # Cut short on the way: the engine's replay buffer still holds it whole.
                self.gaps += 1
                self.missing += 1
                return self._start_replay(seq, seq + 1, now, unreadable=True)
            self.expected = seq + 1  # its number is used; its events are gone
            return [EventsLost()]
        if batch is None:
            return []  # an unreadable payload out of sequence: its number is not trusted
        if not self._continues(seq):
            self._suspect = (seq, batch)  # decided by the next batch
            return []
        return self._jump(seq, batch, now)

    def _continues(self, seq: int) -> bool:
        """Whether `seq` is a plausible next number: the expected one, a gap of at most SUSPECT_JUMP,
        or a number of an engine that started again (at most SUSPECT_JUMP)."""
        assert self.expected is not None
        return seq <= SUSPECT_JUMP or self.expected <= seq <= self.expected + SUSPECT_JUMP

    def _judge_suspect(self, seq: int, batch: KvEventBatch | None, now: float) -> list[Step]:
        """The batch after an implausible number: it confirms the jump or shows it was a bad frame."""
        assert self._suspect is not None
        suspect_seq, suspect = self._suspect
        if seq == suspect_seq + 1 and not self._continues(seq):
            self._suspect = None
            steps = self._jump(suspect_seq, suspect, now)
            if self._replay is not None:
                return steps + self.published(seq, batch, now)
            return steps + self._place(seq, batch, now)
        if batch is None and seq != self.expected:
            return []  # an unreadable batch out of sequence decides nothing
        self._suspect = None
        self.refused += 1
        self.rejects.reject(
            IMPLAUSIBLE_REASON,
            f"{self.replay_address or 'publisher'}: seq {suspect_seq} after {self.last_seq}",
        )
        return self._place(seq, batch, now)

    def _jump(self, seq: int, batch: KvEventBatch, now: float) -> list[Step]:
        """A readable batch whose number is not the expected one: an engine restart, or a gap."""
        assert self.expected is not None
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
        if not self.replay_allowed(now):
            self.lost += seq - start - self._forget_shed(start, seq)  # shed ones are counted shed
            self.expected = seq + 1
            gap = GapClosed(start, seq, recovered=0, replayed=False, not_asked=self.can_replay)
            steps += [gap, EventsLost(), Accept(seq, batch)]
            return steps
        self._hold(seq, batch, last=False)
        steps += self._start_replay(start, seq, now)
        return steps

    def _start_replay(self, start: int, stop: int | None, now: float, unreadable: bool = False) -> list[Step]:
        self._replay = _Replay(start, stop, now + self.replay_timeout, unreadable)
        return [AskReplay(start)]

    def _finish(self, timed_out: bool, now: float, held_full: bool = False) -> list[Step]:
        """The replay ended or was given up: accept what came back, count the rest, release the held."""
        replay = self._replay
        assert replay is not None
        self._replay = None
        steps: list[Step] = [DropReplayConnection()] if timed_out else []
        if timed_out and not replay.got and (held_full or now >= replay.deadline):  # not a word back
            self._unanswered += 1
            self.unanswered_until = now + self.replay_timeout
            if self._unanswered >= UNANSWERED_IN_A_ROW:
                self.paused_until, self._unanswered = now + UNANSWERED_PAUSE_S, 0
                self.pauses += 1
        elif replay.got or not timed_out:
            self._unanswered = 0
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
        # a batch the source shed is counted shed, not lost (one the replay brought back is recovered)
        shed = self._forget_shed(replay.start, replay.stop, recovered=replay.got)
        self.lost += missing - recovered - shed
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
                held_full=held_full,
            )
        )
        self._after_unanswered = timed_out  # the gaps among the held ones are not waited for again
        try:
            return steps + self._release_held(now)
        finally:
            self._after_unanswered = False

    @property
    def held_bytes(self) -> int:
        """The decoded size of the batches held for the pending replay."""
        return self._held_bytes

    def _hold(self, seq: int, batch: KvEventBatch | None, last: bool) -> None:
        """Hold a batch for the pending replay: at the end, or first (the one that revealed the gap)."""
        (self._held.append if last else self._held.appendleft)((seq, batch))
        self._held_bytes += batch_bytes(batch)

    def _release_held(self, now: float) -> list[Step]:
        steps: list[Step] = []
        while self._held and self._replay is None:
            seq, batch = self._held.popleft()
            self._held_bytes -= batch_bytes(batch)
            steps += self._place(seq, batch, now)
        return steps


def batch_bytes(batch: KvEventBatch | None) -> int:
    """A decoded batch's size in memory: its arrays (the per-event tuples are small beside them)."""
    if batch is None:
        return 0
    arrays = (batch.kinds, batch.key_offsets, batch.keys, batch.block_sizes, batch.token_counts)
    return sum(a.nbytes for a in (*arrays, batch.group_idx, batch.parents, batch.has_parent))
