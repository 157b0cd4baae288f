"""The app's pure parts: themes as data, number formatting, view cycling, units, export serializers."""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import math

import pytest

from kvset import quantities as fmt
from kvset.api import EngineState, Targets
from kvset.report import curve_csv
from kvset.report.as_csv import COLUMNS as CSV_COLUMNS
from kvset.report.as_json import snapshot_json
from kvset_tui.capacity_units import capacity_text, to_unit
from kvset_tui.export import export_snapshot
from kvset_tui.sparkline import DOWN, FLAT, UP, spark_levels, sparkline, trend_arrow
from kvset_tui.theming import (
    ANSI_NAMES,
    REQUIRED_KEYS,
    ThemeError,
    available_themes,
    choose_theme,
    load_theme,
    parse_theme,
)
from kvset_tui.view_state import ViewState, unit_missing_reason
from tests.support.tui_snapshots import demo_snapshot, empty_snapshot, engine_snapshot, replay_snapshot

# -- themes ----------------------------------------------------------------------------------


def test_the_package_ships_dark_light_ansi_and_mono_themes_as_toml_resources():
    shipped = {p.name for p in importlib.resources.files("kvset_tui.themes").iterdir()}
    assert {"dark.toml", "light.toml", "ansi.toml", "mono.toml"} <= shipped
    assert {"dark", "light", "ansi", "mono"} <= set(available_themes())


@pytest.mark.parametrize("name", ["dark", "light", "ansi", "mono"])
def test_every_shipped_theme_loads_and_builds_a_textual_theme(name):
    theme = load_theme(name)
    assert set(theme.colors) == set(REQUIRED_KEYS)
    assert theme.textual_theme().name == f"kvset-{name}"


def test_the_ansi_theme_uses_only_the_16_ansi_colour_names():
    theme = load_theme("ansi")
    assert theme.ansi and set(theme.colors.values()) <= ANSI_NAMES
    assert theme.plotext("curve_all") == "blue+"  # bright_blue in Plotext's naming
    assert theme.textual_theme().primary == "ansi_blue"


def _theme_text(ansi: bool, **override: str) -> str:
    colours = {k: ("red" if ansi else "#102030") for k in REQUIRED_KEYS} | override
    body = "\n".join(f'{k} = "{v}"' for k, v in colours.items())
    return f'name = "t"\nansi = {"true" if ansi else "false"}\n[colors]\n{body}\n'


def test_theme_files_are_validated():
    assert parse_theme(_theme_text(False)).plotext("ok") == (0x10, 0x20, 0x30)
    with pytest.raises(ThemeError, match="not one of the 16 ANSI names"):
        parse_theme(_theme_text(True, ok="#ff0000"))
    with pytest.raises(ThemeError, match="must be #rrggbb"):
        parse_theme(_theme_text(False, ok="red"))
    with pytest.raises(ThemeError, match="missing colours: ok"):
        parse_theme(_theme_text(False).replace('ok = "#102030"\n', ""))
    with pytest.raises(ThemeError, match="not valid TOML"):
        parse_theme("name = ")
    with pytest.raises(ThemeError, match="available: "):
        load_theme("no-such-theme")


def test_no_color_selects_the_monochrome_theme_whatever_was_asked():
    assert choose_theme("light", environ={"NO_COLOR": "1"}).name == "mono"
    assert choose_theme("light", environ={}).name == "light"
    assert choose_theme(None, environ={}).name == "dark"
    assert load_theme("mono").monochrome and not load_theme("dark").monochrome


# -- formatting ------------------------------------------------------------------------------


def test_numbers_carry_their_units():
    assert fmt.count(999) == "999"
    assert fmt.count(12_345) == "12.3k"
    assert fmt.count(1_234_567) == "1.23M"
    assert fmt.count(3281.7) == "3,282"
    assert fmt.count(None) == "–"
    assert fmt.compact(10_000) == "10k" and fmt.compact(2_500_000) == "2.5M"
    assert fmt.format_gib(80 * 2**30, significant=3) == "80 GiB"
    assert fmt.format_gib(1.5 * 2**40, significant=3) == "1,536 GiB"
    assert (
        fmt.format_bytes(327_680, significant=3) == "320 KiB"
        and fmt.format_bytes(5 * 2**40, significant=3) == "5 TiB"
    )
    assert fmt.percent(0.6234) == "62.3 %" and fmt.points(0.041) == "+4.1 pt"
    assert (
        fmt.target_label(0.999, "coverage") == "99.9 % cov"
        and fmt.target_label(0.7, "absolute") == "70 % abs"
    )
    assert (
        fmt.age(0.4) == "0.4 s"
        and fmt.age(94) == "94 s"
        and fmt.age(600) == "10 min"
        and fmt.age(None) == "never"
    )


def test_sparkline_scales_from_zero_and_keeps_gaps():
    assert sparkline([0, 4, 8], 3) == "▁▅█"
    assert sparkline([8, 8], 2) == "██" and sparkline([0, 0], 2) == "▁▁"
    assert sparkline([8, 8], 2, low=None) == "▅▅"  # flat on its own range: middle bars
    assert sparkline([1, math.nan, 2], 3)[1] == " "
    assert sparkline(range(100), 5) == sparkline(range(95, 100), 5)  # the newest values
    assert sparkline([10, 11], 2, low=None) == "▁█"  # own range: drift shows


@pytest.mark.parametrize(
    "values,arrow",
    [
        ([1_000, 6_000, 6_783, 4_735], DOWN),  # a fall after a rise: the last step, not first to last
        ([6_783, 6_000, 5_500, 5_000, 4_735, 4_000], DOWN),  # a steady fall
        ([4_900, 4_880, 4_850, 4_820, 4_790, 4_760], FLAT),  # a few per cent: flat bars, a flat arrow
        ([1_000, 2_000, 8_000, 8_000], UP),  # risen, then level: from the first bar
        ([5_000, math.nan, 6_000, 9_000], UP),  # gaps are not bars
        ([5_000], None),
    ],
)
def test_the_trend_arrow_is_what_the_sparkline_draws(values, arrow):
    assert trend_arrow(values, 6) == arrow
    bars = [b for b in spark_levels(values, 6) if b is not None]
    if arrow == DOWN:
        assert bars[-1] < max(bars)  # the line drawn ends below where it was
    if arrow == FLAT:
        assert len(set(sparkline(values, 6))) == 1


# -- view state and units --------------------------------------------------------------------


def test_units_cycle_skips_what_the_snapshot_cannot_show():
    demo, engine = demo_snapshot(), engine_snapshot()
    view, skipped = ViewState().next_unit(demo)
    assert view.unit == "tokens" and skipped == []
    view, skipped = view.next_unit(demo)
    assert view.unit == "blocks" and len(skipped) == 1 and "--model" in skipped[0]
    assert ViewState(unit="tokens").next_unit(engine)[0].unit == "GiB"
    no_block_size = dataclasses.replace(empty_snapshot(), units=None)  # a hand-made one
    assert unit_missing_reason("tokens", no_block_size) is not None
    assert ViewState(unit="GiB").effective_unit(demo) == "blocks"


def test_windows_and_target_sets_cycle():
    v = ViewState()
    assert [v := v.next_window() for _ in range(4)][-1].window == "5m"
    snap = engine_snapshot()
    assert ViewState().next_target_mode(snap)[0].target_mode == "absolute"
    only_cov = dataclasses.replace(snap, targets=Targets({"coverage": (0.95,)}))
    view, notice = ViewState().next_target_mode(only_cov)
    assert view.target_mode == "coverage" and "only coverage" in notice


def test_capacities_convert_with_the_snapshots_geometry():
    snap = engine_snapshot()
    per_block = snap.bytes_per_block
    assert (
        snap.block_tokens == 16 and per_block == 16 * 24_576
    )  # Qwen3-Next: 24 KiB of full attention a token
    assert to_unit(1000, snap, "tokens") == 16_000
    assert to_unit(1000, snap, "GiB") == pytest.approx(1000 * per_block / 2**30)
    assert capacity_text(snap.get(EngineState).pool_blocks, snap, "blocks") == "12.0k blk"
    assert capacity_text(None, snap, "GiB") == "–"


# -- export ----------------------------------------------------------------------------------


def test_export_serializer_writes_strict_json():
    data = snapshot_json(engine_snapshot(seq=7))
    text = json.dumps(data, allow_nan=False)  # nan became null
    back = json.loads(text)
    assert back["seq"] == 7 and back["churn"]["slot_seconds"] == 1.0
    assert isinstance(back["windows"]["all"]["curve"], list)


def test_export_writes_json_svg_and_csv(tmp_path):
    snap = demo_snapshot(seq=9)
    json_path, svg_path, csv_path = export_snapshot(snap, "<svg/>", tmp_path / "new", now=1_767_225_600.0)
    assert json_path.name == "kvset-top-20260101-000000-seq9.json" and csv_path.suffix == ".csv"
    assert json.loads(json_path.read_text())["seq"] == 9
    assert svg_path.read_text() == "<svg/>"
    assert csv_path.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)


def test_curve_csv_leaves_unknown_capacities_empty():
    snap = replay_snapshot()  # no model: no GiB
    lines = curve_csv(snap, ("all", "1h")).splitlines()
    rows = [line.split(",") for line in lines[1:]]
    by_window = {w: [r for r in rows if r[0] == w] for w in ("all", "1h")}
    assert by_window["all"] and by_window["1h"] and len(rows) == len(by_window["all"]) + len(by_window["1h"])
    assert lines.count(lines[0]) == 1  # one header for both windows
    gib = CSV_COLUMNS.index("capacity_gib")
    assert all(row[gib] == "" for row in rows) and all(
        row[CSV_COLUMNS.index("capacity_tokens")] for row in rows
    )
