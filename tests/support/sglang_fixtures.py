"""SGLang 0.5.23's own KV-event streams recorded into tests/fixtures/sglang_kv_events/ (see its README),
read with the validation harness's frames reader, and fed to a KvEventTracker."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine_model import EngineModel
from kvset.rejects import RejectCounter
from tests.support.paths import FIXTURES, ROOT

SGLANG_EVENTS = FIXTURES / "sglang_kv_events"
_spec = importlib.util.spec_from_file_location(
    "zmq_frames", ROOT / "benchmarks" / "vllm_engine" / "frames.py"
)
assert _spec is not None and _spec.loader is not None
frames_file = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(frames_file)


def messages(name: str) -> list[tuple[float, list[bytes]]]:
    return list(frames_file.read(SGLANG_EVENTS / f"{name}.zmqframes.gz"))


def truth(name: str) -> dict:
    """What SGLang itself counted in the run: its prompt and cached tokens, the pages it published."""
    return json.loads((SGLANG_EVENTS / f"{name}.json").read_text())


@dataclass
class Consumed:
    tracker: KvEventTracker
    model: EngineModel
    accesses: int
    rejects: RejectCounter


def consume(recorded: list[tuple[float, list[bytes]]], skip: frozenset[int] = frozenset()) -> Consumed:
    """Every message (but those at the indices in `skip`) to one tracker, taking its output after each."""
    rejects = RejectCounter()
    tracker = KvEventTracker(["sglang"], [None], rejects)
    model = EngineModel()
    accesses = 0
    t = 0.0
    for i, (t, frames) in enumerate(recorded):
        if i in skip:
            continue
        tracker.published(0, frames, t, t)
        accesses += _take(tracker, model, t, False)
    accesses += _take(tracker, model, t + 10, True)
    return Consumed(tracker, model, accesses, rejects)


def _take(tracker: KvEventTracker, model: EngineModel, t: float, final: bool) -> int:
    update = tracker.take(t, final=final)
    if update.engine_model is not None:
        model.add(0, update.engine_model)
    return 0 if update.accesses is None else len(update.accesses.keys)


def path(name: str) -> Path:
    return SGLANG_EVENTS / f"{name}.zmqframes.gz"
