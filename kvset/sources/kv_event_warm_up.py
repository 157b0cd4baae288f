"""The KV-event source's compiled code, loaded while its sockets connect, before its first message.

The tracker and the engine model run numba functions (the resident set, the parent links and block
owners, the free queue, SGLang's radix replay while the stream's shape is undecided) that numba
loads from its on-disk cache the first time each is called: a few tenths of a second in all, paid
on the decoding thread by the first batches of a stream, the first replay of the engine model's
delay line, and the first finished request. Under a flood the figures stood still that much longer
at start. A throwaway tracker fed a few events in vLLM's form, then finished, calls each of them
once, so the stream's first batches find them loaded.
"""

from __future__ import annotations

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


def load_compiled_code() -> KvEventTracker:
    """Run a throwaway tracker over _BATCHES and finish it; returns it (for the tests)."""
    tracker = KvEventTracker(["warm-up"], [None], RejectCounter())
    for seq, events in enumerate(_BATCHES):
        frames = [b"", seq.to_bytes(8, "big"), msgspec.msgpack.encode([1.0, events, 0])]
        tracker.published(0, frames, now=float(seq), at=1.0 + seq)
    tracker.take(10.0, final=True)
    return tracker
