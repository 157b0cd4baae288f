"""Every source decides its stream's units, and every figure in tokens, bytes or pool blocks follows them.

Each test builds the real monitor from kvset-top's flags (kvset.cli.live_monitor.build_monitor) and
checks the GiB and pool figures against a hand computation from the geometry: llama-3.1-70b keeps
80 layers x 8 KV heads x 128 dims x (K and V) x 2 bytes (bf16) = 327,680 bytes of KV a token. The
confirmed wrong number this guards: `--events ... --block-size 32` used to reach the analyzer and
double every GiB figure of a 16-token engine.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np
import pytest

from kvset.api import Curves, EngineState, OperatingPoint, Reserve, WorkingSets
from kvset.cli.flags import add_monitor_arguments
from kvset.cli.live_monitor import build_monitor, once_seconds
from kvset.core.stack_distance import new_analyzer
from kvset.monitor import NEVER_SAID_UNITS, Monitor
from kvset.report import snapshot_json
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.base import Source
from kvset.types import AccessBatch, SourceHealth, SourceUpdate
from kvset.units import CEIL, FLOOR, StreamUnits
from tests.support.engine_metrics_server import FakeEngine
from tests.support.paths import FIXTURES, MOONCAKE_TRACE
from tests.support.vllm_publisher import FakeVllmPublisher
from tests.support.weka_trace import write_weka_style_trace

KV_BYTES_PER_TOKEN = 80 * 8 * 128 * 2 * 2  # llama-3.1-70b, bf16: by hand, not from kvset.geometry
MODEL = ("--model", "llama-3.1-70b")


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_monitor_arguments(p)
    return p.parse_args(list(argv))


def once(*argv: str):
    a = args("--once", *argv)
    monitor = build_monitor(a)
    return monitor.collect(once_seconds(a, monitor))


def assert_figures_in(snap, block_size: int, pool_blocks: int | None) -> None:
    """Every byte and token figure of the snapshot in blocks of `block_size` tokens, and its pool."""
    per_block = block_size * KV_BYTES_PER_TOKEN
    assert snap.block_tokens == block_size and snap.units.block_size == block_size
    assert snap.bytes_per_block == per_block
    rows = [r for r in snap.get(WorkingSets).rows if r.capacity_blocks is not None]
    assert rows, "no working set reached"
    for r in rows:
        assert r.capacity_bytes == r.capacity_blocks * per_block  # GiB = this / 2**30
        assert r.capacity_tokens == r.capacity_blocks * block_size
    assert snap.get(EngineState).pool_blocks == pool_blocks
    if pool_blocks is not None:
        assert snap.get(Reserve).pool_bytes == pool_blocks * per_block
        assert snap.get(OperatingPoint).capacity_tokens == pool_blocks * block_size
    js = snapshot_json(snap)
    assert js["block_tokens"] == block_size and js["units"]["block_size"] == block_size


def test_events_bring_their_own_block_size_whatever_block_size_says():
    engine = FakeEngine()
    engine.num_gpu_blocks = 1001  # blocks of 16 tokens, vLLM's null block among them
    try:
        with FakeVllmPublisher() as pub:
            a = args(
                "--once",
                "--events",
                pub.endpoint,
                "--metrics",
                engine.url,
                "--metrics-interval",
                "0.2",
                "--duration",
                "4",
                "--block-size",
                "32",
                *MODEL,
            )
            monitor = build_monitor(a)
            got = []
            thread = threading.Thread(target=lambda: got.append(monitor.collect(once_seconds(a, monitor))))
            thread.start()
            pub.wait_for_subscriber(timeout=20)
            prefix = list(range(1, 41))
            for r in range(6):  # six requests sharing a 40-block prefix, each with 10 blocks of its own
                own = list(range(1000 * (r + 1), 1000 * (r + 1) + 10))
                pub.publish([pub.stored(prefix + own, block_size=16)])
                time.sleep(0.05)
            thread.join(30)
    finally:
        engine.stop()
    (snap,) = got
    assert snap.units == StreamUnits(16, "event")
    assert snap.totals.accesses == 300 and snap.totals.tokens == 300 * 16
    assert_figures_in(snap, 16, 1000)  # not 32: the flag is for events that do not say theirs


@pytest.mark.parametrize("given", [None, 32])
def test_a_log_is_hashed_and_sized_in_the_engines_block_size(given):
    log = str(FIXTURES / "logs" / "vllm_0_13_debug.log")
    snap = once("--log", log, *(("--block-size", str(given)) if given else ()), *MODEL)
    block_size = given or 16
    assert snap.units == StreamUnits(block_size, "flag" if given else "default", "sha256")
    # "GPU KV cache size: 980,400 tokens": that many tokens' blocks, less vLLM's null block
    assert_figures_in(snap, block_size, 980_400 // block_size - 1)


def test_a_replayed_trace_keeps_its_formats_block_size_and_converts_the_engines_pool():
    engine = FakeEngine()  # the fixture's 61,275 blocks of 16 tokens
    try:
        snap = once(
            "--replay",
            str(MOONCAKE_TRACE),
            "--metrics",
            engine.url,
            "--metrics-interval",
            "0.2",
            "--duration",
            "3",
            *MODEL,
        )
    finally:
        engine.stop()
    assert snap.units == StreamUnits(512, "format", convention=CEIL)
    assert snap.totals.accesses == 121_877
    assert_figures_in(snap, 512, (61_275 - 1) * 16 // 512)


@pytest.mark.parametrize("given", [(), ("--block-size", "64")])
def test_a_full_blocks_only_trace_is_replayed_at_64(tmp_path, given):
    path = write_weka_style_trace(tmp_path / "weka.jsonl")
    snap = once("--replay", str(path), *given, *MODEL)
    assert (snap.units.block_size, snap.units.convention) == (64, FLOOR)
    assert snap.units.block_size_from == ("flag" if given else "inferred")
    assert snap.totals.tokens == 64 * snap.totals.accesses  # full blocks only: no partial last block
    assert not any("doubtful" in n for n in snap.sources[0].notes)
    assert_figures_in(snap, 64, None)


def test_metrics_alone_are_in_the_engines_own_blocks():
    engine = FakeEngine()
    try:
        snap = once("--metrics", engine.url, "--metrics-interval", "0.2", "--duration", "1.5", *MODEL)
    finally:
        engine.stop()
    assert snap.units == StreamUnits(16, "metrics") and snap.totals.accesses == 0
    assert snap.get(EngineState).pool_blocks == 61_274 and snap.bytes_per_block == 16 * KV_BYTES_PER_TOKEN
    assert snap.get(Reserve).pool_bytes == 61_274 * 16 * KV_BYTES_PER_TOKEN


def test_the_demo_is_generated_in_the_block_size_asked_for():
    a = args("--once", "--demo", "--block-size", "32", *MODEL)
    monitor = build_monitor(a)
    monitor.sources[0].duration = 60.0  # keep the test short
    snap = monitor.collect(once_seconds(a, monitor))
    assert snap.units == StreamUnits(32, "flag") and snap.totals.tokens == 32 * snap.totals.accesses
    assert_figures_in(snap, 32, 10_240)  # its pretend pool: 10,240 blocks of its own size


@pytest.mark.parametrize("flag", ["--log-block-size", "--events-block-size"])
def test_the_old_per_source_flags_say_what_replaced_them(flag, capsys):
    from kvset_tui.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([flag, "32"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{flag} is gone: give --block-size 32" in err


class Units(Source):
    """Hands over updates as given: a source that learns its units from its data says them late."""

    kind = "test"
    name = "late"

    def __init__(self, updates, units=None) -> None:
        self._updates, self.units = updates, units

    def updates(self, stop):
        yield SourceUpdate(health=SourceHealth(self.name, self.kind, True, "connected"))
        yield from self._updates


def batch(keys, block_size=None, t=1.0):
    return AccessBatch(np.asarray(keys, dtype=np.uint64), timestamps=t, block_size=block_size)


def collect(*sources):
    return Monitor(list(sources), new_analyzer, SnapshotBuilder(SnapshotConfig())).collect()


def test_accesses_before_the_units_wait_for_them_and_none_is_lost():
    late = Units(
        [
            SourceUpdate(accesses=batch([1, 2, 3])),
            SourceUpdate(accesses=batch([1, 2]), units=StreamUnits(64, "inferred")),
        ]
    )
    snap = collect(late)
    assert snap.units == StreamUnits(64, "inferred") and snap.totals.accesses == 5
    assert snap.totals.tokens == 5 * 64 and snap.get(Curves).curve("all").hits(3) == 2


def test_a_batch_of_another_block_size_is_refused_counted_and_named():
    stream = Units(
        [SourceUpdate(accesses=batch([1, 2, 3], 16)), SourceUpdate(accesses=batch([4, 5], 32))],
        StreamUnits(16, "flag"),
    )
    other = Units([SourceUpdate(accesses=batch([6, 7, 8, 9]))], StreamUnits(512, "format"))
    other.name = "other"
    snap = collect(stream, other)
    assert snap.units.block_size == 16 and snap.totals.accesses == 3 and snap.totals.tokens == 48
    refused = {h.source: [(r.reason, r.count) for r in h.rejected] for h in snap.sources}
    assert refused["late"] == [("blocks of 32 tokens in a stream of 16-token blocks: accesses refused", 2)]
    assert refused["other"] == [("blocks of 512 tokens in a stream of 16-token blocks: accesses refused", 4)]


def test_a_source_that_never_says_its_units_has_its_accesses_refused_not_dropped_silently():
    snap = collect(Units([SourceUpdate(accesses=batch([1, 2, 3]))]))
    (health,) = snap.sources
    assert snap.totals.accesses == 0 and [(r.reason, r.count) for r in health.rejected] == [
        (NEVER_SAID_UNITS, 3)
    ]


def test_a_single_sources_units_said_before_its_accesses_make_the_analyzer_at_once():
    """A KV-event stream says its units with its first store, about 40 batches before its first
    finished request: the analyzer (its tables allocated for the whole horizon) is made then, not on
    the path of the first accesses (issue 25: 40 ms more before a flood's first figure)."""
    units = StreamUnits(16, "event")
    alone = Monitor([Units([])], new_analyzer, SnapshotBuilder(SnapshotConfig()))
    alone._apply(0, SourceUpdate(units=units))
    assert alone.analyzer is not None and alone.units == units
    # with several sources, the first whose accesses come decides the stream's units: it still waits
    two = Monitor([Units([]), Units([])], new_analyzer, SnapshotBuilder(SnapshotConfig()))
    two._apply(0, SourceUpdate(units=units))
    assert two.analyzer is None
    two._apply(1, SourceUpdate(accesses=batch([1, 2]), units=StreamUnits(32, "event")))
    assert two.units == StreamUnits(32, "event")
