"""The hit-rate curve panel: what it plots (read off the snapshot), its axis, its labelled lines, and
how it looks at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from kvset.api import BeladyMin, Curves, EngineState, OperatingPoint, WorkingSets
from kvset_tui.capacity_units import to_unit
from kvset_tui.curve_data import (
    MOVES_AT,
    OPT_MARK,
    capacity_reaching,
    line_labels,
    nice_ticks,
    plot_data,
    saturation_capacity,
)
from kvset_tui.view_state import ViewState
from kvset_tui.widgets.curve_plot import HitRateCurvePlot
from tests.support.tui_snapshots import (
    demo_snapshot,
    empty_snapshot,
    engine_snapshot,
    metrics_only_snapshot,
    mooncake_opt_snapshot,
    mooncake_snapshot,
    panel_app,
    screen_text,
)

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 40)]


# -- what is plotted -------------------------------------------------------------------------------
def test_plot_data_stops_where_the_curve_saturates_not_at_the_grid_horizon():
    snap = demo_snapshot()
    assert saturation_capacity(snap.get(Curves).curve("5m")) <= snap.get(Curves).curve("5m").max_distance()
    data = plot_data(snap, ViewState())
    assert data is not None and data.window is not None
    assert data.x_high < snap.horizon
    assert all(0.0 <= y <= 100.0 for y in data.all_time.y)
    assert [m for m, _ in data.markers] == ["95", "99", "99.9"]


@pytest.mark.parametrize(
    "snapshot", [demo_snapshot, engine_snapshot, mooncake_snapshot], ids=["demo", "engine", "mooncake"]
)
def test_the_axis_starts_where_the_curve_moves_and_ends_past_every_line(snapshot):
    """From 1 block, a third of the width (and more) was a flat 0 %: at most a fifth is flat now."""
    snap = snapshot()
    view = ViewState(window="all")
    data = plot_data(snap, view)
    final = max(data.all_time.y)
    flat = [y for y in data.all_time.y if y < MOVES_AT * final]
    assert len(flat) <= len(data.all_time.y) / 5, (len(flat), len(data.all_time.y))
    assert data.x_low <= capacity_reaching(
        snap.get(Curves).curve("all"), MOVES_AT
    )  # the rise itself is on the plot
    rows = snap.get(WorkingSets).rows_for("all", "coverage")
    largest = max(r.capacity_blocks for r in rows if r.reached)
    assert data.x_high > max(largest, snap.get(EngineState).pool_blocks or 0)


def test_plot_data_in_gib_uses_token_hit_rates_and_the_engine_point():
    snap = engine_snapshot()
    data = plot_data(snap, ViewState(unit="GiB"))
    op = snap.get(OperatingPoint)
    assert data.hit_unit == "tokens"
    assert data.engine == (
        pytest.approx(to_unit(op.capacity_blocks, snap, "GiB")),
        pytest.approx(100 * op.measured_token_hit_rate),
    )


def test_nice_ticks():
    assert nice_ticks(1, 60_000, True, 10) == [1, 10, 100, 1000, 10_000]
    assert nice_ticks(0, 100, False, 5) == [0, 20, 40, 60, 80, 100]


def test_every_vertical_line_gets_a_label_that_does_not_overlap_another():
    data = plot_data(demo_snapshot(), ViewState())
    labels = line_labels(data, True, 100, 30)
    assert sorted(text for text, *_ in labels) == sorted(["95", "99", "99.9", "pool"])
    rows: dict[float, list[tuple[float, str]]] = {}
    for text, x, y, _key, _align in labels:
        rows.setdefault(y, []).append((x, text))
    assert len(rows) > 1  # the working sets sit close together: their labels are stacked


# -- on screen --------------------------------------------------------------------------------------
def plot_lines(app) -> list[str]:
    """The plot's own lines: the screen without its title and its legend (the border lines)."""
    return screen_text(app).splitlines()[1:-2]


async def test_mono_tells_the_lines_apart_by_their_labels():
    app = panel_app(HitRateCurvePlot, demo_snapshot(), theme="mono")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        inside = "\n".join(plot_lines(app))
    for label in ("pool", "95", "99.9"):
        assert label in inside, label


async def test_empty_snapshot_waits_for_block_accesses():
    app = panel_app(HitRateCurvePlot, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert "waiting for block accesses" in screen_text(app)


async def test_metrics_only_shows_the_engine_point():
    snap = metrics_only_snapshot()
    app = panel_app(HitRateCurvePlot, snap)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        plot = app.panel
        op = snap.get(OperatingPoint)
        assert plot.data is not None
        assert plot.data.engine == (
            float(snap.get(EngineState).pool_blocks),
            pytest.approx(100 * op.measured_token_hit_rate),
        )
        assert "engine's own point only" in str(plot.border_subtitle)
        assert "◆" in screen_text(app)


async def test_the_title_says_the_unit_and_the_scale():
    app = panel_app(HitRateCurvePlot, engine_snapshot())
    async with app.run_test(size=(120, 40)) as pilot:
        assert str(app.panel.border_title) == "LRU block hit rate vs blocks, log"
        app.set_view(ViewState(unit="GiB", log_x=False))
        await pilot.pause()
        assert str(app.panel.border_title) == "LRU token hit rate vs GiB, linear"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_curve_screenshot(snap_compare, size):
    """The engine's curve: all time and 5 min, the working-set lines, the pool and the engine's point."""
    assert snap_compare(panel_app(HitRateCurvePlot, engine_snapshot()), terminal_size=size)


def test_curve_screenshot_mono(snap_compare):
    """Without colour every line is a `│`: the labels say which is which."""
    assert snap_compare(panel_app(HitRateCurvePlot, demo_snapshot(), theme="mono"), terminal_size=(120, 40))


async def test_the_knee_is_marked_where_the_reports_put_it():
    snap = mooncake_snapshot()
    curve = snap.get(Curves).curve("all")
    d = plot_data(snap, ViewState(window="all"))
    knee = curve.knee()
    assert knee is not None and d.knee == (float(knee), 100.0 * curve.hit_rate(knee))
    in_tokens = plot_data(snap, ViewState(window="all", unit="tokens"))
    assert in_tokens.knee[0] == curve.knee("tokens") * snap.block_tokens
    app = panel_app(HitRateCurvePlot, snap)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text, inside = screen_text(app), "\n".join(plot_lines(app))
    assert "● knee" in text
    assert "●" in inside


# -- Belady MIN (--opt) ----------------------------------------------------------------------------
async def test_min_is_a_second_line_labelled_min_above_lru():
    """The replayed file's MIN curve, read off the snapshot at the plot's capacities, never under LRU's,
    named in the legend and on the plot (a short screen has no legend)."""
    snap = mooncake_opt_snapshot()
    d = plot_data(snap, ViewState(window="all"))
    assert d.opt is not None and d.opt.x == d.all_time.x
    assert d.opt.y == [100.0 * r for r in snap.get(BeladyMin).curve.hit_rates([int(x) for x in d.opt.x])]
    assert all(o >= a for o, a in zip(d.opt.y, d.all_time.y, strict=True))
    assert (
        sum(o > a for o, a in zip(d.opt.y, d.all_time.y, strict=True)) > len(d.opt.y) / 2
    )  # a real gap here
    assert plot_data(mooncake_snapshot(), ViewState(window="all")).opt is None  # without --opt, no MIN
    for size in SIZES:
        app = panel_app(HitRateCurvePlot, snap, ViewState(window="all"))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            inside = "\n".join(plot_lines(app))
            assert "MIN" in inside and OPT_MARK in inside
            assert str(app.panel.border_title).startswith("LRU and MIN block hit rate")
            if size == (120, 40):
                assert f"{OPT_MARK} MIN" in str(app.panel.border_subtitle)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_curve_with_min_screenshot(snap_compare, size):
    """The Mooncake trace replayed with --opt: LRU's curve, MIN's dotted one to its left, the knee."""
    assert snap_compare(
        panel_app(HitRateCurvePlot, mooncake_opt_snapshot(), ViewState(window="all")), terminal_size=size
    )


async def test_empty_snapshot_on_a_first_run_says_the_kernels_compile(tmp_path, monkeypatch):
    # a fresh install: no compiled kernel in the package's cache folder (kvset.core.jit_cache)
    from kvset.core import jit_cache

    monkeypatch.setattr(jit_cache, "PACKAGE", tmp_path)
    app = panel_app(HitRateCurvePlot, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert "compiling the kernels (first run only)" in screen_text(app)
    cache = tmp_path / "core" / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "kernel.feed-42.py311.nbi").write_bytes(b"")  # numba's index of one cached kernel
    app = panel_app(HitRateCurvePlot, empty_snapshot())
    async with app.run_test(size=(80, 24)):
        assert "waiting for block accesses" in screen_text(app)
