"""kvset's prediction from a recorded engine run, in-process: every batch read, no sockets, no clock.

    .venv/bin/python benchmarks/vllm_engine/in_process.py out/events-p5000-r3000-a24-s1-w1024-full.zmqframes.gz 5000

Feeds the recorded frames (frames.py) to kvset's KvEventTracker in the order they came and prints
the engine model's predicted token hit rate at each pool size given, as `run.py --offline` would
read it from kvset-top's `operating_point`. kvset-top replaying at speed 1 loses batches on a loaded
machine (it sheds what it cannot keep up with, and says so); this reads them all, so its figure
depends on the recording only (counts, not times). Run it from the kvset checkout being measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import frames as framesfile  # noqa: E402

from kvset.engine.kv_event_tracker import KvEventTracker  # noqa: E402
from kvset.engine_model import EngineModel  # noqa: E402
from kvset.rejects import RejectCounter  # noqa: E402


def predict(recording: Path, pools: list[int]) -> dict[int, float]:
    """The model's predicted token hit rate per pool size, from every recorded batch."""
    tracker = KvEventTracker(["recorded"], [None], RejectCounter())
    model = EngineModel()
    now = 0.0
    for t, message in framesfile.read(recording):
        now = t
        tracker.published(0, message, now, t)
        update = tracker.take(t)
        if update.engine_model is not None:
            model.add(0, update.engine_model)
    update = tracker.take(now + 10, final=True)  # (the stream went quiet: every request finishes)
    if update.engine_model is not None:
        model.add(0, update.engine_model)
    return {pool: model.at(pool).hit_rate for pool in pools}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recording", type=Path, help="an events-*.zmqframes.gz file of run.py")
    p.add_argument("pools", help="pool sizes in blocks, comma-separated")
    args = p.parse_args(argv)
    try:
        pools = [int(x) for x in args.pools.split(",")]
        predicted = predict(args.recording, pools)
    except (OSError, ValueError) as exc:
        print(f"in_process.py: {exc}", file=sys.stderr)
        return 2
    for pool, rate in predicted.items():
        print(f"{args.recording.name} pool {pool:,}: kvset predicted {100 * rate:.2f} % (a MODEL)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
