"""The engine's own tiers (SGLang's HiCache) in the Tiers figure: each tier's measured share of the
prompt tokens (cached_tokens_total by cache_source) and the pages its medium holds (the KV events),
beside what --tiers plans for the same tiers off the curve."""

from __future__ import annotations

import numpy as np

from kvset.core.stack_distance import new_analyzer
from kvset.figures import tiers
from kvset.figures.base import OptionValues, Sizes, TextView
from kvset.figures.inputs import FigureInputs, Targets
from kvset.figures.tables import NOT_KNOWN
from kvset.types import AccessBatch, EngineReading
from kvset.units import StreamUnits

HICACHE = EngineReading(
    at=0.0,
    queries_since_start=10_000.0,
    tier_hits_since_start=(("device", 2_000.0), ("host", 3_000.0), ("storage_file", 500.0)),
    resident_by_medium=(("GPU", 400), ("CPU_PINNED", 1_600)),
)


def inputs(engine: EngineReading | None, **options: object) -> FigureInputs:
    """A scan of 1,000 blocks read three times: a tier of 1,000 blocks or more hits 2 reads in 3."""
    units = StreamUnits(16, "event")
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
    )


def planned(text: str, mode: str) -> dict[str, object]:
    return {tiers.TIERS.dest: tiers.TIERS.read(text), tiers.TIER_MODE.dest: mode}


def test_each_tier_the_engine_counts_is_measured_beside_the_plan_for_the_same_tier():
    result = inputs(HICACHE, **planned("500,1500", "inclusive")).result(tiers.FIGURE)
    assert result is not None and result.plan is not None
    device, host, storage = result.engine
    assert (device.name, device.token_hit_rate, device.resident_pages) == ("device", 0.2, 400)
    assert (host.name, host.token_hit_rate, host.resident_pages) == ("host", 0.3, 1_600)
    assert (storage.name, storage.token_hit_rate, storage.resident_pages) == ("storage", 0.05, None)
    # inclusive tiers of 500 and 1,500 blocks on the scan: the device none, the host 2 reads in 3
    assert [t.token_hit_rate for t in result.plan.tiers] == [0.0, 2 / 3]
    assert result.note is None  # the plan is already inclusive, as HiCache's write-through is
    table = "\n".join(tiers.text(result, _view()))
    host_row = next(line for line in table.splitlines() if line.lstrip().startswith("2 ") and "host" in line)
    assert "30.00 %" in host_row and "66.67 %" in host_row and "1,600" in host_row
    storage_row = next(line for line in table.splitlines() if "storage" in line)
    assert NOT_KNOWN in storage_row  # no third tier planned, no storage medium in the events
    js = tiers.FIGURE.json_of(result, _view().sizes)
    assert js["engine_tiers"][1] == {
        "tier": 2,
        "name": "host",
        "token_hit_rate": 0.3,
        "resident_pages": 1_600,
    }


def test_an_exclusive_plan_is_told_that_hicache_writes_through():
    result = inputs(HICACHE, **planned("500,1500", "exclusive")).result(tiers.FIGURE)
    assert result is not None and result.note == tiers.INCLUSIVE_NOTE
    assert tiers.INCLUSIVE_NOTE in tiers.text(result, _view())


def test_without_tiers_planned_the_engine_tiers_alone_and_nothing_for_one_tier():
    alone = inputs(HICACHE).result(tiers.FIGURE)
    assert alone is not None and alone.plan is None and not alone.planned and len(alone.engine) == 3
    assert tiers.FIGURE.json_of(alone, _view().sizes)["tiers"] is None
    device_only = EngineReading(at=0.0, queries_since_start=10.0, tier_hits_since_start=(("device", 5.0),))
    assert inputs(device_only).result(tiers.FIGURE) is None
    assert inputs(None, **planned("500", "exclusive")).result(tiers.FIGURE).engine == ()


def _view() -> TextView:
    return TextView(Sizes(16, None))
