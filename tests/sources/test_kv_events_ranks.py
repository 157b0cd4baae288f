"""The KV-events source marks each access with the data-parallel rank whose cache saw it: the rank
its publisher's batches carry, else the endpoint's place; a single endpoint gives no ranks at all."""

from __future__ import annotations

import threading
import time

import msgspec
import numpy as np

from kvset.sources.kv_events import KvEventsSource
from tests.support.vllm_publisher import FakeVllmPublisher


class Collected:
    """Every access a source yields, with its rank (None where the batch had none)."""

    def __init__(self, source: KvEventsSource) -> None:
        self.source = source
        self.keys: list[int] = []
        self.ranks: list[int | None] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for update in self.source.updates(self.stop):
            batch = update.accesses
            if batch is None:
                continue
            self.keys += batch.keys.tolist()
            if batch.rank is None:
                self.ranks += [None] * len(batch)
            else:
                self.ranks += np.broadcast_to(batch.rank, (len(batch),)).tolist()

    def wait_for(self, n: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.keys) < n:
            assert time.monotonic() < deadline, f"{len(self.keys)} of {n} accesses arrived"
            time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def collect(*publishers: FakeVllmPublisher) -> Collected:
    run = Collected(KvEventsSource([p.endpoint for p in publishers], idle_tick=0.05))
    for p in publishers:
        p.wait_for_subscriber()
    return run


def test_each_access_carries_the_rank_of_the_publisher_that_stored_it():
    rng = np.random.default_rng(4)
    publishers = [
        FakeVllmPublisher(rank=r) for r in (3, 4, 5)
    ]  # ranks 3..5: a port range past the first rank
    sent: dict[int, list[int]] = {3: [], 4: [], 5: []}
    try:
        run = collect(*publishers)
        for _ in range(60):
            p = publishers[int(rng.integers(3))]
            # new blocks on their rank, the same keys on several ranks (a block stored again on its own
            # rank would be a lookup's hit report, handed on only once its admission shows)
            first = len(sent[p.rank]) + 1
            keys = list(range(first, first + int(rng.integers(1, 6))))
            p.publish([p.stored(keys)])
            sent[p.rank] += keys
        run.wait_for(sum(len(k) for k in sent.values()))
    finally:
        run.close()
        for p in publishers:
            p.close()
    assert set(run.ranks) == {3, 4, 5}
    for rank, keys in sent.items():
        assert [k for k, r in zip(run.keys, run.ranks, strict=True) if r == rank] == keys


def test_without_a_rank_in_the_batches_the_endpoint_order_numbers_them():
    old_payload = msgspec.msgpack.Encoder()
    publishers = [FakeVllmPublisher(), FakeVllmPublisher()]
    try:
        run = collect(*publishers)
        for i, p in enumerate(publishers):
            # an older vLLM's batch: [ts, events] without the data-parallel rank
            p.publish_payload(old_payload.encode([1.0, [p.stored([10 + i, 20 + i])]]))
        run.wait_for(4)
    finally:
        run.close()
        for p in publishers:
            p.close()
    assert sorted(zip(run.keys, run.ranks, strict=True)) == [(10, 0), (11, 1), (20, 0), (21, 1)]


def test_a_single_endpoint_is_the_whole_stream_without_ranks():
    with FakeVllmPublisher(rank=2) as p:
        run = collect(p)
        try:
            p.publish([p.stored([1, 2, 3])])
            run.wait_for(3)
        finally:
            run.close()
    assert run.keys == [1, 2, 3] and run.ranks == [None, None, None]
