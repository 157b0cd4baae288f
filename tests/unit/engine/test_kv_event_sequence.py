"""The sequence/replay protocol of one KV-event publisher, on plain values: no socket, no clock."""

from __future__ import annotations

from kvset.engine.kv_event_sequence import (
    Accept,
    AskReplay,
    DropReplayConnection,
    EngineRestarted,
    EventsLost,
    GapClosed,
    KvEventSequence,
    Step,
)
from kvset.rejects import RejectCounter
from tests.support.kv_values import END_OF_REPLAY, batch, payload, replayed, stored

REPLAY = "tcp://127.0.0.1:5558"
TIMEOUT = 1.0


def one(key: int):
    """A readable batch storing block `key`."""
    return batch([stored([key])])


def outline(steps: list[Step]) -> list[tuple]:
    """The steps as short tuples: Accept by its seq and keys, the others by their fields."""
    out: list[tuple] = []
    for step in steps:
        if isinstance(step, Accept):
            out.append(("accept", step.seq, step.batch.keys.tolist()))
        elif isinstance(step, AskReplay):
            out.append(("ask", step.start))
        elif isinstance(step, EventsLost):
            out.append(("lost",))
        elif isinstance(step, DropReplayConnection):
            out.append(("drop",))
        elif isinstance(step, EngineRestarted):
            out.append(("restart", step.last_seq, step.seq))
        elif isinstance(step, GapClosed):
            out.append(("gap", step.start, step.stop, step.recovered, step.lost))
    return out


def sequence(replay: str | None = REPLAY) -> KvEventSequence:
    return KvEventSequence(replay, TIMEOUT, RejectCounter())


def test_batches_in_order_are_accepted_from_wherever_the_subscriber_joined() -> None:
    seq = sequence()
    steps = [s for n in (7, 8, 9) for s in seq.published(n, one(n), now=0.0)]
    assert outline(steps) == [("accept", 7, [7]), ("accept", 8, [8]), ("accept", 9, [9])]
    assert (seq.first_seq, seq.last_seq, seq.gaps, seq.lost) == (7, 9, 0, 0)
    assert not seq.replaying and seq.deadline is None


def test_a_gap_is_asked_of_the_replay_endpoint_and_the_held_batches_follow_the_replayed_ones() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    assert outline(seq.published(3, one(3), now=10.0)) == [("ask", 1)]
    assert seq.replaying and seq.deadline == 10.0 + TIMEOUT and seq.being_replayed == 2
    assert seq.published(4, one(4), now=10.1) == []  # held while the replay is pending
    # Replies in any order, a duplicate and one outside the gap: each missing batch once, in order.
    for n in (2, 1, 2, 9):
        assert seq.replay_reply(replayed(n, [stored([n])]), now=10.2) == []
    steps = seq.replay_reply(END_OF_REPLAY, now=10.3)
    assert outline(steps) == [
        ("accept", 1, [1]),
        ("accept", 2, [2]),
        ("gap", 1, 3, 2, 0),
        ("accept", 3, [3]),
        ("accept", 4, [4]),
    ]
    gap = next(s for s in steps if isinstance(s, GapClosed))
    assert gap.describe("rank 0") == "rank 0: 2 batches missing (seq 1..2): 2 recovered by replay, 0 lost"
    assert (seq.gaps, seq.missing, seq.recovered, seq.lost, seq.last_seq) == (1, 2, 2, 0, 4)
    assert not seq.replaying


def test_a_replay_that_does_not_end_in_time_counts_the_rest_lost() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    seq.published(3, one(3), now=5.0)
    seq.replay_reply(replayed(1, [stored([1])]), now=5.1)  # seq 2 never comes, nor the end marker
    assert seq.tick(now=5.0 + TIMEOUT - 0.01) == []
    steps = seq.tick(now=5.0 + TIMEOUT)
    assert outline(steps) == [
        ("drop",),
        ("accept", 1, [1]),
        ("lost",),
        ("gap", 1, 3, 1, 1),
        ("accept", 3, [3]),
    ]
    gap = next(s for s in steps if isinstance(s, GapClosed))
    assert gap.describe("rank 0").endswith("1 recovered by replay, 1 lost (replay timed out)")
    assert (seq.recovered, seq.lost) == (1, 1)
    # A late answer to the replay given up is not taken for anything.
    assert seq.replay_reply(replayed(2, [stored([2])]), now=7.0) == []
    assert outline(seq.published(4, one(4), now=7.0)) == [("accept", 4, [4])]


def test_a_replay_request_that_cannot_be_sent_is_given_up_at_once() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    seq.published(2, one(2), now=0.0)
    assert outline(seq.replay_unsent(now=0.0)) == [
        ("drop",),
        ("lost",),
        ("gap", 1, 2, 0, 1),
        ("accept", 2, [2]),
    ]


def test_a_gap_without_a_replay_endpoint_is_lost_at_once() -> None:
    seq = sequence(replay=None)
    seq.published(0, one(0), now=0.0)
    steps = seq.published(3, one(3), now=0.0)
    assert outline(steps) == [("gap", 1, 3, 0, 2), ("lost",), ("accept", 3, [3])]
    assert steps[0].describe("rank 1") == "rank 1: 2 batches lost (seq 1..2); no replay endpoint"
    assert (seq.gaps, seq.missing, seq.lost, seq.last_seq) == (1, 2, 2, 3)


def test_an_unreadable_batch_in_sequence_is_asked_again_by_its_number() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    assert outline(seq.published(1, None, now=0.0)) == [("ask", 1)]
    seq.published(2, one(2), now=0.0)
    seq.replay_reply(replayed(1, [stored([1])]), now=0.1)
    steps = seq.replay_reply(END_OF_REPLAY, now=0.2)
    assert outline(steps) == [("accept", 1, [1]), ("gap", 1, 2, 1, 0), ("accept", 2, [2])]
    assert steps[1].describe("rank 0") == "rank 0: seq 1 unreadable: recovered by replay"


def test_a_publisher_that_sends_unreadable_bytes_is_not_asked_again_for_each() -> None:
    rejects = RejectCounter()
    seq = KvEventSequence(REPLAY, TIMEOUT, rejects)
    seq.published(0, one(0), now=0.0)
    seq.published(1, None, now=0.0)
    seq.replay_reply([b"", b"", (1).to_bytes(8, "big"), b"\xc1 not msgpack"], now=0.1)
    steps = seq.replay_reply(END_OF_REPLAY, now=0.1)
    assert outline(steps) == [("lost",), ("gap", 1, 2, 0, 1)]
    assert "replayed copy is unreadable too" in steps[1].describe("rank 0")
    assert not rejects  # the published copy was rejected once already, by whoever decoded it
    # The next unreadable batch costs its events, not another replay; its number is used.
    assert outline(seq.published(2, None, now=1.0)) == [("lost",)]
    assert outline(seq.published(3, one(3), now=1.0)) == [("accept", 3, [3])]


def test_an_unreadable_batch_without_a_replay_endpoint_keeps_its_number() -> None:
    seq = sequence(replay=None)
    seq.published(0, one(0), now=0.0)
    assert outline(seq.published(1, None, now=0.0)) == [("lost",)]
    assert outline(seq.published(2, one(2), now=0.0)) == [("accept", 2, [2])]
    assert seq.gaps == 0
    # Out of sequence, an unreadable batch's number is not trusted: no gap, no restart.
    assert seq.published(9, None, now=0.0) == [] and seq.published(0, None, now=0.0) == []
    assert (seq.gaps, seq.restarts, seq.last_seq) == (0, 0, 2)


def test_a_sequence_going_back_is_an_engine_restart() -> None:
    seq = sequence()
    for n in range(4):
        seq.published(n, one(n), now=0.0)
    assert outline(seq.published(0, one(10), now=0.0)) == [("restart", 3, 0), ("accept", 0, [10])]
    assert (seq.restarts, seq.gaps, seq.last_seq) == (1, 0, 0)


def test_a_restart_seen_late_replays_the_new_publishers_first_batches() -> None:
    seq = sequence()
    for n in range(5):
        seq.published(n, one(n), now=0.0)
    assert outline(seq.published(2, one(12), now=0.0)) == [("restart", 4, 2), ("ask", 0)]
    seq.replay_reply(replayed(0, [stored([10])]), now=0.1)
    seq.replay_reply(replayed(1, [stored([11])]), now=0.1)
    steps = seq.replay_reply(END_OF_REPLAY, now=0.1)
    assert outline(steps) == [
        ("accept", 0, [10]),
        ("accept", 1, [11]),
        ("gap", 0, 2, 2, 0),
        ("accept", 2, [12]),
    ]


def test_a_held_batch_that_reveals_another_gap_starts_the_next_replay() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    seq.published(2, one(2), now=0.0)  # gap 1
    seq.published(5, one(5), now=0.0)  # held: 3 and 4 are missing too
    seq.published(6, one(6), now=0.0)  # held
    seq.replay_reply(replayed(1, [stored([1])]), now=0.1)
    steps = seq.replay_reply(END_OF_REPLAY, now=0.2)
    assert outline(steps) == [("accept", 1, [1]), ("gap", 1, 2, 1, 0), ("accept", 2, [2]), ("ask", 3)]
    assert seq.deadline == 0.2 + TIMEOUT and seq.being_replayed == 2
    seq.replay_reply(replayed(3, [stored([3])]), now=0.3)
    seq.replay_reply(replayed(4, [stored([4])]), now=0.3)
    steps = seq.replay_reply(END_OF_REPLAY, now=0.3)
    assert outline(steps) == [
        ("accept", 3, [3]),
        ("accept", 4, [4]),
        ("gap", 3, 5, 2, 0),
        ("accept", 5, [5]),
        ("accept", 6, [6]),
    ]
    assert (seq.gaps, seq.missing, seq.recovered, seq.lost) == (2, 3, 3, 0)


def test_malformed_replay_replies_are_rejected_and_the_replay_goes_on() -> None:
    rejects = RejectCounter()
    seq = KvEventSequence(REPLAY, TIMEOUT, rejects)
    seq.published(0, one(0), now=0.0)
    seq.published(2, one(2), now=0.0)
    seq.replay_reply([b"only", b"two"], now=0.1)
    seq.replay_reply([b"", b"\x00\x01", payload([stored([1])])], now=0.1)
    seq.replay_reply(replayed(1, [stored([1])]), now=0.1)
    assert outline(seq.replay_reply(END_OF_REPLAY, now=0.1))[:2] == [("accept", 1, [1]), ("gap", 1, 2, 1, 0)]
    assert {r.reason: r.count for r in rejects.summary()} == {
        "replay: malformed reply": 1,
        "replay: sequence frame is not 8 bytes": 1,
    }


def test_a_quiet_stream_is_asked_for_a_lost_last_batch_which_comes_back_as_a_recovered_gap() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    # batch 1 was the stream's last, and was lost on the way: no later batch reveals the gap
    assert outline(seq.probe_tail(now=5.0)) == [("ask", 1)]
    assert seq.being_replayed == 0  # it waits for no batch it knows of
    seq.replay_reply(replayed(1, [stored([1])]), now=5.1)
    assert outline(seq.replay_reply(END_OF_REPLAY, now=5.2)) == [("accept", 1, [1]), ("gap", 1, 2, 1, 0)]
    assert (seq.last_seq, seq.gaps, seq.missing, seq.recovered, seq.lost, seq.tail_probes) == (
        1,
        1,
        1,
        1,
        0,
        1,
    )


def test_a_tail_probe_that_finds_nothing_counts_nothing_and_one_cut_short_by_a_batch_gives_way() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    seq.probe_tail(now=5.0)
    assert outline(seq.replay_reply(END_OF_REPLAY, now=5.1)) == []
    assert (seq.gaps, seq.lost) == (0, 0)
    seq.probe_tail(now=9.0)
    # the stream goes on meanwhile: the probe is dropped and the batch taken as usual
    assert outline(seq.published(1, one(1), now=9.1)) == [("drop",), ("accept", 1, [1])]
    assert not seq.replaying
    assert sequence(replay=None).probe_tail(now=1.0) == []  # nothing to ask without a replay endpoint


def test_no_tail_probe_while_replays_are_paused_after_unanswered_ones() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    for gap_at, now in ((2, 1.0), (4, 3.0)):  # two replays in a row without a word back
        assert outline(seq.published(gap_at, one(gap_at), now=now))[-1] == ("ask", gap_at - 1)
        seq.tick(now=now + TIMEOUT)
    assert seq.pauses == 1
    # the stream goes quiet: asking the silent endpoint would hold its last requests one wait more
    assert seq.probe_tail(now=5.0) == [] and seq.tail_probes == 0
