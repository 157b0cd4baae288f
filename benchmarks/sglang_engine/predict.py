"""kvset's prediction from a recorded SGLang event stream: the KV-event tracker and the engine model.

Runs in kvset's venv. Feeds every recorded message, byte for byte, to kvset.engine's
KvEventTracker (what `kvset-top --events` runs in its source thread), sums the engine model as the
monitor does, and prints, as JSON, the stream shape, the accesses, the model's name and its token hit
rate at the pool (max_total_num_tokens / page_size pages).

    python predict.py RUN.zmqframes.gz --pool-pages 1875 [--policy lfu]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "vllm_engine"))
import frames as framesfile  # noqa: E402

from kvset.engine.kv_event_tracker import KvEventTracker  # noqa: E402
from kvset.engine_model import EngineModel  # noqa: E402
from kvset.rejects import RejectCounter  # noqa: E402


def predict(path: Path, pool_pages: int, policy: str = "lru") -> dict:
    rejects = RejectCounter()
    tracker = KvEventTracker(["recorded"], [None], rejects, radix_policy=policy)
    model = EngineModel()
    accesses = 0
    stored_pages = 0
    now = 0.0
    for t, frames in framesfile.read(path):
        now = t
        tracker.published(0, frames, now, t)
        update = tracker.take(t)
        accesses += len(update.accesses.keys) if update.accesses is not None else 0
        if update.engine_model is not None:
            model.add(0, update.engine_model)
    update = tracker.take(now + 10, final=True)
    accesses += len(update.accesses.keys) if update.accesses is not None else 0
    if update.engine_model is not None:
        model.add(0, update.engine_model)
    publisher = tracker.publishers[0]
    stored_pages = tracker.counted_total(lambda b: b.stored_total)
    at = model.at(pool_pages)
    return {
        "shape": publisher.shape.describe(tracker.hits_reported),
        "model": model.name,
        "accesses": accesses,
        "stored_pages": stored_pages,
        "requests": model.requests,
        "predicted_hit_rate": at.hit_rate,
        "pinned_share": at.pinned,
        "counts": model.counts,
        "rejects": rejects.total,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("frames", type=Path)
    ap.add_argument("--pool-pages", type=int, required=True)
    ap.add_argument("--policy", default="lru", help="the --radix-eviction-policy kvset replays")
    args = ap.parse_args()
    print(json.dumps(predict(args.frames, args.pool_pages, args.policy)))


if __name__ == "__main__":
    main()
