"""The KV-event source's compiled code, loaded while its sockets connect, before its first message.

The tracker and the engine model run numba functions (the resident set, the parent links and block
owners, the free queue, SGLang's radix replay) that numba
loads from its on-disk cache the first time each is called: a few tenths of a second in all, paid
on the decoding thread by the first batches of a stream, the first replay of the engine model's
delay line, and the first finished request. Under a flood the figures stood still that much longer
at start. Throwaway trackers fed a few events in vLLM's form and in SGLang's (signed hashes: its
radix replay), then finished, call each of them once, so the stream's first batches find them loaded.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.rejects import RejectCounter

_BLOCKS = 1_200  # past the free queue's first table and slots: its growth and compaction run too
# (events of one batch) in vLLM's tagged-array form: a request; a lookup of its first two blocks (a
# hit report) with the next request's store chained onto them; an eviction
_BATCHES = (
    [["BlockStored", list(range(1, _BLOCKS + 1)), None, [7] * (16 * _BLOCKS), 16, None, "GPU"]],
    [
        ["BlockStored", [1, 2], None, [7] * 32, 16, None, "GPU"],
        ["BlockStored", [_BLOCKS + 1], 2, [7] * 16, 16, None, "GPU"],
    ],
    [["BlockRemoved", [_BLOCKS], "GPU"]],
)
# SGLang's: an insert of a request's pages, the next request's chained onto its first two, an eviction
_SGLANG_BATCHES = (
    [["BlockStored", [-k for k in range(1, _BLOCKS + 1)], None, [7] * _BLOCKS, 1, None, "GPU"]],
    [["BlockStored", [-(_BLOCKS + 1)], -2, [7], 1, None, "GPU"]],
    [["BlockRemoved", [-_BLOCKS], "GPU"]],
)


def load_compiled_code() -> tuple[KvEventTracker, KvEventTracker]:
    """Run throwaway trackers over _BATCHES and _SGLANG_BATCHES and finish them; returns them (for
    the tests)."""
    return _run(_BATCHES), _run(_SGLANG_BATCHES)


def _run(batches: Sequence[Sequence[object]]) -> KvEventTracker:
    tracker = KvEventTracker(["warm-up"], [None], RejectCounter())
    for seq, events in enumerate(batches):
        frames = [b"", seq.to_bytes(8, "big"), msgspec.msgpack.encode([1.0, events, 0])]
        tracker.published(0, frames, now=float(seq), at=1.0 + seq)
    tracker.take(10.0, final=True)
    return tracker
