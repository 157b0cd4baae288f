"""A live monitor tracks a few pools' worth of blocks, allocated at start; a file's analysis the larger
default, grown as blocks come."""

from __future__ import annotations

import argparse

from kvset.cli import build_parser
from kvset.cli.flags import add_monitor_arguments
from kvset.cli.live_monitor import build_monitor
from kvset.core import DEFAULT_HORIZON, LIVE_HORIZON
from kvset.engine_model.records import MODEL_HORIZON
from kvset.units import StreamUnits


def test_a_live_monitor_defaults_to_the_live_horizon_and_allocates_it_once():
    parser = argparse.ArgumentParser()
    add_monitor_arguments(parser, service=True)
    args = parser.parse_args(["--events", "tcp://127.0.0.1:1"])
    assert args.horizon == LIVE_HORIZON < DEFAULT_HORIZON
    monitor = build_monitor(args)
    analyzer = monitor.new_analyzer(StreamUnits(16, "flag"), preallocate=True)
    assert analyzer.horizon == LIVE_HORIZON
    before = analyzer._t.table
    analyzer.feed(range(1, 200_001), timestamps=0.0)  # past the first doublings of a grown table
    assert analyzer._t.table is before and analyzer._t.nbytes() < 128 << 20


def test_the_live_horizon_is_the_engine_models_reach_and_its_tables_leave_room_under_a_flood():
    """Toward issue 25's 400 MB for kvset serve under a flood: the live analyzer's tables, allocated
    at start, take at most 64 MiB (they took 96 at 1,048,576 blocks); the curve reaches as far as the
    engine model does."""
    args = build_parser(["serve"]).parse_args(["serve", "--events", "tcp://127.0.0.1:1", "--listen", "0"])
    assert args.horizon == LIVE_HORIZON == MODEL_HORIZON
    analyzer = build_monitor(args).new_analyzer(StreamUnits(16, "flag"), preallocate=True)
    assert analyzer._t.nbytes() <= 64 << 20


def test_kvset_analyze_keeps_the_larger_default_horizon():
    args = build_parser(["analyze"]).parse_args(["analyze", "trace.jsonl"])
    assert args.horizon == DEFAULT_HORIZON
