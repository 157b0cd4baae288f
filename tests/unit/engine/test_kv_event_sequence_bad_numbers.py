"""Sequence numbers that must not be taken on trust, and replays that must not pile up: one frame
numbered 2**62, real large jumps, a replay endpoint that never answers while gaps keep coming."""

from __future__ import annotations

from kvset.engine.kv_event_sequence import (
    IMPLAUSIBLE_REASON,
    MAX_HELD,
    MAX_HELD_BYTES,
    SUSPECT_JUMP,
    UNANSWERED_IN_A_ROW,
    UNANSWERED_PAUSE_S,
    Accept,
    AskReplay,
    EngineRestarted,
    GapClosed,
    KvEventSequence,
    batch_bytes,
)
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter
from tests.support.kv_values import batch, message, stored

REPLAY = "tcp://127.0.0.1:5558"
ABSURD = 1 << 62


def one(key: int):
    return batch([stored([key])])


def feed(seq: KvEventSequence, numbers, now: float = 0.0) -> list:
    steps = []
    for n in numbers:
        steps += seq.published(n, one(n % (1 << 32)), now)
    return steps


def accepted(steps) -> list[int]:
    return [s.seq for s in steps if isinstance(s, Accept)]


def test_one_frame_numbered_2_to_the_62_is_refused_not_taken_for_lost_batches() -> None:
    for replay in (None, REPLAY):
        rejects = RejectCounter()
        seq = KvEventSequence(replay, 1.0, rejects)
        steps = feed(seq, [*range(10), ABSURD, *range(10, 20)])
        assert accepted(steps) == list(range(20))  # every real batch, in order
        assert not any(isinstance(s, EngineRestarted | GapClosed | AskReplay) for s in steps)
        assert (seq.gaps, seq.missing, seq.lost, seq.restarts, seq.refused) == (0, 0, 0, 0, 1)
        assert seq.last_seq == 19 and seq.held == 0
        [rejection] = rejects.summary()
        assert rejection.reason == IMPLAUSIBLE_REASON and rejection.count == 1
        assert str(ABSURD) in rejection.examples[0]


def test_an_absurd_frame_right_before_a_real_gap_costs_only_itself() -> None:
    seq = KvEventSequence(None, 1.0, RejectCounter())
    steps = feed(seq, [0, 1, ABSURD, 5, 6])  # 2..4 really missing
    assert accepted(steps) == [0, 1, 5, 6]
    assert (seq.lost, seq.refused, seq.restarts) == (3, 1, 0)


def test_a_large_jump_confirmed_by_the_next_batch_is_a_real_gap() -> None:
    far = 10 + SUSPECT_JUMP * 5  # e.g. a subscriber that was away for a long time
    seq = KvEventSequence(None, 1.0, RejectCounter())
    steps = feed(seq, range(10))
    assert feed(seq, [far]) == []  # held: its number is checked against the next one
    assert seq.held == 1 and seq.suspect_seq == far
    steps = feed(seq, [far + 1, far + 2])
    assert accepted(steps) == [far, far + 1, far + 2]
    gap = next(s for s in steps if isinstance(s, GapClosed))
    assert (gap.start, gap.stop, gap.lost) == (10, far, far - 10)
    assert (seq.lost, seq.refused, seq.held) == (far - 10, 0, 0)


def test_going_back_to_a_large_number_needs_the_next_batch_too() -> None:
    start = 3 * SUSPECT_JUMP
    seq = KvEventSequence(None, 1.0, RejectCounter())
    feed(seq, range(start, start + 5))
    back = SUSPECT_JUMP * 2  # below what was seen, but not an engine that just started
    assert feed(seq, [back]) == []
    steps = feed(seq, [back + 1])
    assert isinstance(steps[0], EngineRestarted) and (steps[0].last_seq, steps[0].seq) == (start + 4, back)
    assert accepted(steps)[-2:] == [back, back + 1]
    # a restart to a small number (an engine that started again) is taken at once, as before
    seq2 = KvEventSequence(None, 1.0, RejectCounter())
    feed(seq2, range(start, start + 5))
    assert isinstance(feed(seq2, [3])[0], EngineRestarted)


def test_the_tracker_keeps_its_resident_set_and_counts_nothing_lost_for_a_bad_frame() -> None:
    rejects = RejectCounter()
    tracker = KvEventTracker(["tcp://e"], [None], rejects)
    for n in range(5):
        tracker.published(0, message(n, [stored([n])]), now=0.0, at=1.0)
    tracker.published(0, message(ABSURD, [stored([99])]), now=0.0, at=1.0)
    for n in range(5, 8):
        tracker.published(0, message(n, [stored([n])]), now=0.0, at=1.0)
    update = tracker.take(1.0, final=True)  # (its requests handed out as finished)
    assert update.accesses.keys.tolist() == list(range(8))  # block 99 never counted
    assert update.engine.resident_blocks == 8
    assert not [e for e in update.events if e.kind in ("engine-reset", "sequence-gap")]
    assert tracker.publishers[0].sequence.lost == 0 and rejects.total == 1


def test_a_replay_endpoint_that_never_answers_while_gaps_keep_coming_does_not_pile_up() -> None:
    # 20 batches a second, one missing in every 10 (2 gaps a second), replay timeout 1 s, no answer ever
    rate, timeout = 20, 1.0
    seq = KvEventSequence(REPLAY, timeout, RejectCounter())
    published = [n for n in range(1200) if n % 10 != 5]  # the numbers that arrive
    steps, asks, most_held = [], [], 0
    for n in published:
        now = n / rate
        out = seq.tick(now) + seq.published(n, one(n), now)
        asks += [s.start for s in out if isinstance(s, AskReplay)]
        steps += out
        most_held = max(most_held, seq.held)
    steps += seq.tick(published[-1] / rate + 10 * timeout)  # let the last wait run out
    got = accepted(steps)
    assert got == published  # every batch that arrived is analysed, in order
    assert seq.lost == 1200 // 10 and seq.held == 0  # every missing one is counted lost
    assert len(asks) == len(set(asks))  # no gap is waited for twice
    assert most_held <= 2 * rate * timeout  # one wait's worth at most: the waits do not chain


def test_a_wait_that_holds_too_many_batches_gives_the_replay_up() -> None:
    seq = KvEventSequence(REPLAY, 3600.0, RejectCounter())  # a timeout that never comes in this test
    feed(seq, [0, 2])  # gap at 1: the replay is asked, 2 held
    steps = feed(seq, range(3, 3 + MAX_HELD))
    assert seq.held == 0 and not seq.replaying
    gap = next(s for s in steps if isinstance(s, GapClosed))
    assert gap.lost == 1 and "batches arrived while waiting" in gap.describe("rank 0")
    assert accepted(steps) == list(range(2, 3 + MAX_HELD))


def test_a_wait_holds_at_most_max_held_bytes_of_large_batches() -> None:
    big = batch([stored(list(range(1, 10_001)))])  # one 10,000-block batch, reused
    size = batch_bytes(big)
    seq = KvEventSequence(REPLAY, 3600.0, RejectCounter())  # a timeout that never comes here
    seq.published(0, big, 0.0)
    seq.published(2, big, 0.0)  # gap at 1: asked, held
    steps, most = [], 0
    for n in range(3, 3 + 2 * MAX_HELD_BYTES // size):
        steps += seq.published(n, big, 0.0)
        most = max(most, seq.held_bytes)
    assert most < MAX_HELD_BYTES + size  # bounded in bytes, far below MAX_HELD batches
    gap = next(s for s in steps if isinstance(s, GapClosed))
    assert gap.held_full and gap.lost == 1 and seq.held_bytes < MAX_HELD_BYTES


def test_a_dead_replay_endpoint_under_a_flood_costs_one_wait_per_pause() -> None:
    """100 batches a second, every second one missing, an endpoint that never answers: each batch
    that arrives is analysed within the timeout, in order, and only one gap per pause is waited for."""
    rate, timeout, seconds = 100, 1.0, 60
    seq = KvEventSequence(REPLAY, timeout, RejectCounter())
    arrived_at: dict[int, float] = {}
    steps, asks, latest = [], [], 0.0
    for n in range(0, rate * seconds, 2):
        now = n / rate
        arrived_at[n] = now
        out = seq.tick(now) + seq.published(n, one(n), now)
        asks += [s.start for s in out if isinstance(s, AskReplay)]
        latest = max([latest] + [now - arrived_at[s.seq] for s in out if isinstance(s, Accept)])
        steps += out
    steps += seq.tick(seconds + 10 * timeout)
    assert accepted(steps) == sorted(arrived_at)  # every batch that arrived is analysed, in order
    assert latest <= timeout + 1 / rate  # none held longer than the stated wait
    assert seq.lost == len(arrived_at) - 1 and seq.held == 0  # every missing one counted lost
    assert len(asks) <= UNANSWERED_IN_A_ROW * (seconds / UNANSWERED_PAUSE_S + 1)  # not one wait per gap
    assert seq.pauses >= seconds / (UNANSWERED_PAUSE_S + UNANSWERED_IN_A_ROW * timeout) - 1


def test_a_dead_replay_endpoint_never_holds_the_stream_two_waits_back_to_back() -> None:
    """The same flood: a gap found just after an unanswered replay's release asked again at once, so a
    stream's first batches were held two timeouts in a row (its first figures waited for both). Now
    a gap found within one stated wait after a replay that got no answer is counted lost at once:
    the stream is held at most one timeout at a stretch, then runs at least as long."""
    rate, timeout = 100, 1.0
    seq = KvEventSequence(REPLAY, timeout, RejectCounter())
    held_since, longest, not_asked = None, 0.0, 0
    for n in range(0, rate * 30, 2):
        now = n / rate
        steps = seq.tick(now) + seq.published(n, one(n), now)
        not_asked += sum(isinstance(s, GapClosed) and s.not_asked for s in steps)
        if seq.held and held_since is None:
            held_since = now
        elif not seq.held and held_since is not None:
            longest, held_since = max(longest, now - held_since), None
    assert longest <= timeout + 2 / rate  # one wait at a stretch, not two
    assert seq.pauses >= 2 and not_asked > 0  # the dead endpoint still pauses replays; gaps counted
    # a gap past that wait is asked again (the endpoint may have had a slow moment)
    seq = KvEventSequence(REPLAY, timeout, RejectCounter())
    seq.published(0, one(0), 0.0)
    seq.published(2, one(2), 0.0)  # asked, never answered
    seq.tick(timeout)
    assert not seq.replay_allowed(timeout + timeout / 2)
    assert seq.replay_allowed(2 * timeout)
    assert isinstance(seq.published(4, one(4), 2 * timeout)[-1], AskReplay)
