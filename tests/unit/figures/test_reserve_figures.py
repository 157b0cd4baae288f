"""The reserve figures: the model's hybrid-layer reserve beside the working set in bytes, against the
engine's pool, computed from the same inputs for every view."""

from __future__ import annotations

import numpy as np

from kvset.core.stack_distance import new_analyzer
from kvset.figures import hybrid_reserve, reserve
from kvset.figures.base import OptionValues
from kvset.figures.inputs import FigureInputs, Targets
from kvset.geometry import load_preset
from kvset.quantities import GIB
from kvset.types import AccessBatch, EngineReading
from kvset.units import EnginePool, StreamUnits

BLOCK = 512  # Mooncake's tokens per block: bytes come from tokens, whatever the engine's block size


def inputs(geometry_name: str, engine: EngineReading | None = None, **options: object) -> FigureInputs:
    """A scan of 1,000 blocks read three times: its 95 % working set is exactly 1,000 blocks."""
    units = StreamUnits(BLOCK, "format")
    analyzer = new_analyzer(units)
    keys = np.tile(np.arange(1000, dtype=np.uint64), 3)
    analyzer.feed_batch(AccessBatch(keys, timestamps=np.arange(len(keys)) * 0.01))
    values = OptionValues(options)
    return FigureInputs(
        units=units,
        horizon=analyzer.horizon,
        curves={"all": analyzer.curve()},
        targets=Targets.read(values, "top"),
        options=values,
        engine=engine,
        geometry=load_preset(geometry_name),
    )


def test_the_working_set_in_bytes_beside_the_reserve_of_the_running_requests_against_the_pool():
    # 80 GiB of pool at 81,920 B a token: 1,048,576 tokens, 2,048 blocks of 512 (65,536 of vLLM's 16)
    engine = EngineReading(at=0.0, pools=(EnginePool(80 * GIB // 81_920 // 16, 16),), running_requests=8)
    given = inputs("gemma-3-27b", engine, context=32_768)
    panel = given.result(reserve.FIGURE)
    model = given.result(hybrid_reserve.FIGURE)
    assert panel is not None and model is not None
    # 1,000 blocks of 512 tokens = 512,000 tokens x 81,920 B = 41,943,040,000 B
    assert panel.working_set_bytes == 41_943_040_000
    assert panel.hybrid_reserve_bytes == model.reserve.total_bytes == 3_489_660_928  # 436,207,616 x 8
    assert panel.total_bytes == 41_943_040_000 + 3_489_660_928
    assert panel.pool_bytes == 80 * GIB and panel.fits is True
    assert panel.full_attention_bytes_per_block == 81_920 * BLOCK  # of the analyzed stream's blocks
    assert (panel.concurrency, panel.concurrency_source, panel.model) == (8, "measured", "gemma-3-27b")
    assert any("not part of the working set" in n for n in panel.notes)


def test_a_given_concurrency_yields_to_the_engines_count_and_an_unknown_one_is_sized_for_one():
    engine = EngineReading(at=0.0, running_requests=2)
    measured = inputs("gemma-3-27b", engine, concurrency=8).result(hybrid_reserve.FIGURE)
    assert measured is not None and (measured.reserve.concurrency, measured.concurrency_source) == (
        2,
        "measured",
    )
    given = inputs("gemma-3-27b", concurrency=8, context=4096).result(hybrid_reserve.FIGURE)
    assert given is not None and (given.reserve.concurrency, given.concurrency_source) == (8, "given")
    unknown = inputs("gemma-3-27b", context=4096).result(reserve.FIGURE)
    assert unknown is not None and unknown.concurrency_source == "none" and unknown.concurrency == 1
    assert unknown.hybrid_reserve_bytes == 436_207_616 and unknown.pool_bytes is None and unknown.fits is None
    assert any("concurrency unknown" in n for n in unknown.notes)


def test_a_model_without_hybrid_layers_reserves_nothing_and_its_working_set_is_its_bytes():
    dense = inputs("llama-3.1-70b", concurrency=32).result(reserve.FIGURE)
    assert dense is not None and dense.hybrid_reserve_bytes == 0
    assert dense.working_set_bytes == 1000 * BLOCK * 327_680
    assert any("no hybrid layers: reserve 0" in n for n in dense.notes)


def test_without_a_model_there_is_no_reserve():
    empty = new_analyzer(StreamUnits(BLOCK, "format")).curve()
    given = FigureInputs(
        units=None, horizon=10, curves={"all": empty}, targets=Targets({"coverage": (0.95,)})
    )
    assert given.result(reserve.FIGURE) is None and given.result(hybrid_reserve.FIGURE) is None
