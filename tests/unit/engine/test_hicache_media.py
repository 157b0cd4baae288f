"""HiCache's tiers in SGLang 0.5.23's own events (tests/fixtures/sglang_kv_events/hicache): the pages
each medium holds, counted off the GPU and CPU_PINNED stores and removals, equal what SGLang's own tree
and host copies held; the Tiers figure reads them as the device and host tiers."""

from __future__ import annotations

from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.figures.tiers import engine_tiers
from kvset.rejects import RejectCounter
from tests.support.sglang_fixtures import messages, truth


def consumed(medium: str = "GPU") -> KvEventTracker:
    tracker = KvEventTracker(["recorded"], [None], RejectCounter(), medium=medium)
    for t, frames in messages("hicache"):
        tracker.published(0, frames, t, t)
    assert tracker.rejects.total == 0
    return tracker


def test_each_medium_holds_what_sglang_held():
    reading = consumed().reading(0.0)
    expected = truth("hicache")
    assert dict(reading.resident_by_medium) == {
        "GPU": expected["gpu_pages"],
        "CPU_PINNED": expected["cpu_pinned_pages"],
    }
    # write-through: the host holds a copy of what the device evicted, so it holds more
    device, host = engine_tiers(reading)
    assert (device.name, device.resident_pages) == ("device", expected["gpu_pages"])
    assert (host.name, host.resident_pages) == ("host", expected["cpu_pinned_pages"])


def test_the_host_tier_counted_as_accesses_leaves_no_other_medium_to_show():
    assert consumed("all").reading(0.0).resident_by_medium is None
    host = consumed("CPU_PINNED").reading(0.0)
    assert dict(host.resident_by_medium) == {
        "CPU_PINNED": truth("hicache")["cpu_pinned_pages"],
        "GPU": truth("hicache")["gpu_pages"],
    }
