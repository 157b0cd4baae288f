"""The contract values of units: a stream's (StreamUnits) and an engine's pool (EnginePool), and the
one conversion of a pool into the stream's blocks."""

from __future__ import annotations

import pytest

from kvset.types import EngineReading
from kvset.units import CEIL, FLOOR, NULL_BLOCKS_VLLM, EnginePool, StreamUnits


def test_a_pool_in_the_streams_blocks_is_its_caching_tokens_over_the_streams_block_size():
    vllm = EnginePool(num_gpu_blocks=1001, block_size=16, null_blocks=NULL_BLOCKS_VLLM)
    assert vllm.tokens == 1001 * 16  # as the engine reports it
    assert vllm.in_stream_blocks(StreamUnits(16, "event")) == 1000
    assert vllm.in_stream_blocks(StreamUnits(512, "format")) == 1000 * 16 // 512
    assert vllm.in_stream_blocks(StreamUnits(1, "metrics")) == 16_000
    with pytest.raises(ValueError):
        EnginePool(10, 0)


def test_each_rank_gets_the_pool_its_engine_labels_with_it():
    units = StreamUnits(16, "metrics")
    by_label = EngineReading(at=0.0, pools=(EnginePool(31, 16, 1, "1"), EnginePool(51, 16, 1, "0")))
    assert by_label.rank_pool_blocks(units, [0, 1]) == {0: 50, 1: 30}
    assert by_label.pool_blocks(units) == 80 and by_label.capacity_blocks == 82
    logged = EngineReading(
        at=0.0, pools=(EnginePool(10, 16, 0, "EngineCore_DP1 pid=7"), EnginePool(20, 16, 0, "DP0"))
    )
    assert logged.rank_pool_blocks(units, [0, 1]) == {0: 20, 1: 10}
    unlabelled = EngineReading(at=0.0, pools=(EnginePool(10, 16), EnginePool(20, 16)))
    assert unlabelled.rank_pool_blocks(units, [3, 4]) == {3: 10, 4: 20}  # as many as ranks: in order
    one = EngineReading(at=0.0, pools=(EnginePool(100, 16),))
    assert one.rank_pool_blocks(units, [0, 1]) is None  # one pool for two ranks: not theirs to split here
    assert EngineReading(at=0.0).pool_blocks(units) is None


def test_units_say_who_said_them():
    assert StreamUnits(16, "event").describe() == "16 tokens per block (from the KV events)"
    assert StreamUnits(64, "inferred", convention=FLOOR).describe() == (
        "64 tokens per block (inferred from the trace; full blocks only)"
    )
    assert (
        StreamUnits(512, "format", convention=CEIL).describe() == "512 tokens per block (the trace format's)"
    )
    for bad in ({"block_size": 0, "block_size_from": "flag"}, {"block_size": 16, "block_size_from": "guess"}):
        with pytest.raises(ValueError):
            StreamUnits(**bad)
