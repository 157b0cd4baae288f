"""Batches the source sheds to keep up: counted as shed, their events lost, and never taken for a gap
to ask the replay endpoint for (it would send back what kvset had no time for)."""

from __future__ import annotations

from tests.unit.engine.test_kv_event_sequence import TIMEOUT, one, outline, sequence


def test_a_shed_batch_in_sequence_is_lost_events_not_a_gap() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    assert outline(seq.shed_batch(1, now=0.1)) == [("lost",)]  # no ask: the replay endpoint is not bothered
    assert outline(seq.shed_batch(2, now=0.1)) == [("lost",)]
    assert outline(seq.published(3, one(3), now=0.2)) == [("accept", 3, [3])]
    assert (seq.shed, seq.gaps, seq.missing, seq.lost, seq.last_seq) == (2, 0, 0, 0, 3)
    assert not seq.replaying


def test_a_batch_shed_during_a_replay_takes_its_place_when_the_held_batches_are_released() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    assert outline(seq.published(2, one(2), now=1.0)) == [("ask", 1)]  # a real gap: asked
    assert seq.shed_batch(3, now=1.1) == []  # held in its place while the replay is pending
    seq.published(4, one(4), now=1.2)
    steps = seq.tick(now=1.0 + TIMEOUT)
    assert outline(steps) == [
        ("drop",),
        ("lost",),
        ("gap", 1, 2, 0, 1),
        ("accept", 2, [2]),
        ("lost",),
        ("accept", 4, [4]),
    ]
    assert (seq.shed, seq.gaps, seq.lost, seq.last_seq) == (1, 1, 1, 4)  # the shed one is no second gap


def test_a_batch_shed_beyond_a_gap_is_counted_shed_not_lost_too() -> None:
    # ZMQ dropped 3 and 4 (no replay endpoint), then the source shed 5 before 6 came: 2 lost, 1 shed
    seq = sequence(replay=None)
    for n in (1, 2):
        seq.published(n, one(n), now=0.0)
    assert seq.shed_batch(5, now=0.1) == []  # out of sequence: its place comes with the gap
    seq.published(6, one(6), now=0.2)
    assert (seq.gaps, seq.lost, seq.shed, seq.last_seq) == (1, 2, 1, 6)


def test_a_batch_shed_inside_a_replayed_gap_is_not_counted_lost_again() -> None:
    seq = sequence()
    seq.published(0, one(0), now=0.0)
    seq.shed_batch(2, now=0.5)  # ahead of the gap that 3 will show
    assert outline(seq.published(3, one(3), now=1.0)) == [("ask", 1)]
    seq.tick(now=1.0 + TIMEOUT)  # never answered: 1 is lost, 2 was shed
    assert (seq.lost, seq.shed, seq.last_seq) == (1, 1, 3)
