"""The kvset-top command line: display flags, --once routing (no terminal needed), flag errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvset_tui.cli import build_parser, initial_window, main, print_once
from kvset_tui.view_state import UNITS, WINDOW_LABELS
from tests.support.paths import ROOT

TRACE = ROOT / "tests/fixtures/traces/mooncake_fast25_synthetic_trace.jsonl"


def trace_blocks() -> int:
    """Block accesses in the fixture trace, counted straight from the file: one per hash id."""
    return sum(len(json.loads(line)["hash_ids"]) for line in TRACE.read_text().splitlines() if line.strip())


def test_parser_has_the_display_flags_beside_the_monitor_flags():
    args = build_parser().parse_args(
        ["--theme", "ansi", "--no-mouse", "--window", "1h", "--units", "GiB", "--linear", "--export-dir", "x"]
    )
    assert (args.theme, args.no_mouse, args.window, args.units, args.linear) == (
        "ansi",
        True,
        "1h",
        "GiB",
        True,
    )
    assert args.export_dir == Path("x")
    assert args.interval == 1.0 and args.once is False  # from kvset.cli.flags
    defaults = build_parser().parse_args([])
    assert (defaults.theme, initial_window(defaults), defaults.units, defaults.linear) == (
        None,
        "5m",
        "blocks",
        False,
    )
    assert (
        initial_window(build_parser().parse_args(["--replay", "t.jsonl", "--opt"])) == "all"
    )  # MIN's window
    assert set(WINDOW_LABELS) == {"1m", "5m", "1h", "all"} and UNITS == ("blocks", "tokens", "GiB")


def test_theme_choices_are_the_shipped_theme_files():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--theme", "solarized-neon"])
    action = next(a for a in build_parser()._actions if "--theme" in a.option_strings)
    assert {"dark", "light", "ansi", "mono"} <= set(action.choices)


def test_json_without_once_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--json"])
    assert exc.value.code == 2
    assert "--json needs --once" in capsys.readouterr().err


def test_once_prints_the_text_report_without_a_terminal():
    out = subprocess.run(
        [sys.executable, "-m", "kvset_tui", "--once", "--replay", str(TRACE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=True,
    ).stdout
    assert out.startswith("kvset-top report")
    assert f"{trace_blocks():,} accesses" in out  # every block of the fixture trace
    assert "working sets" in out and "\x1b[" not in out  # a plain report: no escape codes


def test_once_json_prints_the_snapshot_json():
    out = subprocess.run(
        [sys.executable, "-m", "kvset_tui", "--once", "--json", "--replay", str(TRACE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["accesses"] == trace_blocks() and data["block_tokens"] == 512


def test_replay_dash_reads_the_trace_from_stdin():
    out = subprocess.run(
        [sys.executable, "-m", "kvset_tui", "--once", "--json", "--replay", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=TRACE.read_text(),
        timeout=120,
        check=True,
    ).stdout
    assert json.loads(out)["accesses"] == trace_blocks()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--replay", "-"], "add --once"),  # the app reads its keys from stdin
        (["--once", "--replay", "-", "--follow"], "stdin (--replay -) is read to its end"),
    ],
)
def test_replay_dash_without_once_or_with_follow_is_a_usage_error(capsys, argv, said):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert said in capsys.readouterr().err


def test_print_once_routes_to_the_library_report():
    from kvset.report import snapshot_json, snapshot_text
    from tests.support.tui_snapshots import engine_snapshot

    snap = engine_snapshot()
    text, js = io.StringIO(), io.StringIO()
    print_once(snap, as_json=False, out=text)
    print_once(snap, as_json=True, out=js)
    assert text.getvalue() == snapshot_text(snap).rstrip("\n") + "\n"
    assert json.loads(js.getvalue()) == json.loads(json.dumps(snapshot_json(snap)))


def test_main_starts_the_app_with_the_display_flags(monkeypatch, tmp_path):
    from kvset_tui.app import KvsetTopApp

    seen = {}

    def fake_run(self, *, mouse=True, **kw):
        seen.update(app=self, mouse=mouse)
        return 0

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(KvsetTopApp, "run", fake_run)
    monkeypatch.setattr("kvset_tui.cli.has_terminal", lambda: True)  # as in a terminal
    code = main(
        [
            "--demo",
            "--no-mouse",
            "--theme",
            "light",
            "--window",
            "1h",
            "--units",
            "tokens",
            "--linear",
            "--target-mode",
            "absolute",
            "--export-dir",
            str(tmp_path),
        ]
    )
    app = seen["app"]
    assert code == 0 and seen["mouse"] is False
    assert app.palette.name == "light" and app.export_dir == tmp_path
    assert (app.view.window, app.view.unit, app.view.log_x, app.view.target_mode) == (
        "1h",
        "tokens",
        False,
        "absolute",
    )
    assert app.monitor is not None and app.monitor.interval == 1.0
    assert (
        app.monitor.builder.config.targets.main_mode == "absolute"
    )  # the snapshot carries it to the churn panel
