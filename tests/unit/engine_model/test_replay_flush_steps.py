"""A quiet stream's delay line replayed a few batches at a time (issue 25: at a flood's end the figures
stood still while its 32 batches were replayed at once) gives what the whole flush at once gives: the
same requests in the same order, the same engine model, the same counters, also when the stream goes
on in the middle of it."""

from __future__ import annotations

import numpy as np

from kvset.engine_model.replay import RequestReplay
from tests.support.vllm_engine_sim import SimEngine, agentic_requests

K = np.uint64


def _feed(replay: RequestReplay, batches, resident: set[int]) -> None:
    for step, events in batches:
        replay.begin_batch(step / 1000)
        for ev in events:
            if ev[0] == "stored":
                keys, parent = ev[1], ev[2]
                cached = all(k in resident for k in keys)
                resident.update(keys)
                replay.stored(np.array(keys, dtype=K), np.full(len(keys), 16, dtype=np.int64), parent, cached)
            elif ev[0] == "removed":
                resident.difference_update(ev[1])
                replay.removed(np.array(ev[1], dtype=K))


def _taken(replay: RequestReplay, out: dict[str, list]) -> None:
    out["accesses"] += [(k.tolist(), t.tolist(), ts) for k, t, ts in replay.take_accesses()]
    parts, keys = replay.take_model_keyed()
    out["model"] += [tuple(np.asarray(a).tolist() for a in part) for part in parts]
    out["model_keys"] += keys


def _run(batches, split: int, steps: int | None) -> tuple[dict[str, list], dict[str, int], list[int]]:
    """The stream up to `split`, a flush (at once, or `steps` batches a call with a take between), the
    rest of the stream, a last flush at once."""
    replay, resident = RequestReplay(), set()
    out: dict[str, list] = {"accesses": [], "model": [], "model_keys": []}
    _feed(replay, batches[:split], resident)
    parts = 0
    if steps is None:
        replay.flush()
    else:
        while not replay.flush(steps):
            parts += 1
            _taken(replay, out)
            if parts == 3:
                break  # the stream goes on mid-flush: the next batch ends the flush first
    _taken(replay, out)
    _feed(replay, batches[split:], resident)
    replay.flush()
    _taken(replay, out)
    assert not replay.flushing
    return out, dict(vars(replay.counts)), [parts]


def test_a_flush_over_several_takes_gives_what_one_flush_gives() -> None:
    batches = SimEngine(150).run(agentic_requests(4, 4, sessions=2, seed=2))
    split = len(batches) // 2
    at_once, counts, _ = _run(batches, split, None)
    stepped, stepped_counts, [parts] = _run(batches, split, 4)
    assert parts >= 3  # the delay line took several calls
    assert stepped == at_once
    assert stepped_counts == counts
    assert at_once["accesses"] and at_once["model"]  # (the workload has requests and lookups)


def test_a_partial_flush_hands_out_the_first_requests_and_the_last_call_finishes_every_one() -> None:
    replay = RequestReplay()
    for b in range(40):  # a flood: one new 3-block request a batch
        replay.begin_batch(b * 0.02)
        replay.stored(np.arange(3 * b + 1, 3 * b + 4, dtype=K), np.full(3, 16, dtype=np.int64), None, False)
    before = len(replay.take_accesses())
    assert not replay.flush(4) and replay.flushing
    first = replay.take_accesses()
    assert 0 < len(first) <= 4  # a request finished per replayed batch, no more
    while not replay.flush(4):
        pass
    rest = replay.take_accesses()
    assert before + len(first) + len(rest) == 40 and replay.open_requests == 0
