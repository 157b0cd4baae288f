"""The engine model on screen: its prediction beside the measured rate, the misses by cause, and the
pool's effective capacity marked on the curve."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvset.api import Curves, EngineState, OperatingPoint
from kvset_tui.app import KvsetTopApp
from kvset_tui.curve_data import plot_data
from kvset_tui.view_state import ViewState
from tests.support.tui_snapshots import ENGINE_POOL_BLOCKS, engine_snapshot, fixed_clock, screen_text

pytestmark = pytest.mark.anyio

BREAKDOWN = (
    ("hit", 0.512),
    ("first_time", 0.061),
    ("capacity", 0.219),
    ("pinned", 0.207),
    ("partial_tail", 0.001),
    ("recomputed_last_block", 0.0),
    ("beyond_horizon", 0.0),
)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def modelled(effective: int = 9_000):
    snap = engine_snapshot()
    op = OperatingPoint(
        capacity_blocks=ENGINE_POOL_BLOCKS,
        capacity_tokens=ENGINE_POOL_BLOCKS * 16,
        measured_token_hit_rate=snap.get(EngineState).reading.token_hit_rate,
        measured_over_seconds=60.0,
        lru_by_window={"all": 0.66, "5m": 0.65},
        curve_scope=snap.curve_scope,
        stale=False,
        label="vllm /metrics",
        model="vLLM block-pool replay",
        model_token_hit_rate=0.512,
        effective_capacity_blocks=effective,
        miss_breakdown=BREAKDOWN,
    )
    engine = replace(snap.get(EngineState), pool_blocks=ENGINE_POOL_BLOCKS)
    return replace(snap, results={**snap.results, OperatingPoint: op, EngineState: engine})


def test_the_effective_capacity_sits_on_the_curve_below_the_pool():
    snap = modelled()
    d = plot_data(snap, ViewState(window="all", unit="blocks"))
    assert d is not None and d.effective is not None
    x, y = d.effective
    assert x == 9_000 < d.engine_capacity
    assert y == pytest.approx(100 * snap.get(Curves).curve("all").hit_rate(9_000, "blocks"))


def test_no_model_no_effective_capacity():
    d = plot_data(engine_snapshot(), ViewState(window="all", unit="blocks"))
    assert d is not None and d.effective is None


async def test_the_thrashing_panel_names_the_model_and_the_misses_by_cause():
    app = KvsetTopApp(monitor=None, snapshot=modelled(), clock=fixed_clock(), theme_name="dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = screen_text(app)
    measured = modelled().get(OperatingPoint).measured_token_hit_rate
    assert (
        f"engine measured {100 * measured:.1f} % · model 51.2 % · LRU 65.0 %" in text
    )  # the LRU in the 5m window
    assert "misses %: new 6.1 cap 21.9 pinned 20.7 tail 0.1" in text
    assert "◇" in text  # the marker on the curve (its legend entry gives way when the legend is full)
