"""What `kvset` and `kvset-top` do at the edges: no terminal, sources that give nothing, --version,
usage errors in one line, recording targets that must not be written."""

from __future__ import annotations

import gzip
import os
import pty
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engine_metrics_server import FakeEngine
from tests.support.paths import MOONCAKE_TRACE, ROOT


def run(module: str, *argv: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        [sys.executable, "-m", module, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw
    )


def kvset_top(*argv: str, **kw) -> subprocess.CompletedProcess:
    return run("kvset_tui", *argv, **kw)


def kvset(*argv: str, **kw) -> subprocess.CompletedProcess:
    return run("kvset", *argv, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- no terminal ---------------------------------------------------------------------------------
def test_the_app_without_a_terminal_says_use_once_and_exits_2():
    # stdin from /dev/null and stdout into a pipe, as under cron or nohup
    done = kvset_top("--demo", timeout=30)
    assert done.returncode == 2
    assert done.stderr == "kvset-top: no terminal: use --once (or run it in a terminal)\n"
    assert done.stdout == ""  # no escape codes written into the pipe


def test_the_app_with_a_terminal_in_but_a_pipe_out_refuses_too():
    primary, secondary = pty.openpty()
    try:
        done = kvset_top("--demo", stdin=secondary, timeout=30)  # keys from a terminal, screen into a pipe
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 2 and "no terminal: use --once" in done.stderr and done.stdout == ""


# -- --once when its sources give nothing -----------------------------------------------------------
def _trace_cases(tmp: Path) -> dict[str, list[str]]:
    empty = tmp / "empty.jsonl"
    empty.write_bytes(b"")
    binary = tmp / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 20)
    shape = tmp / "shape.jsonl"
    shape.write_text('{"a": 1}\n{"b": 2}\n')
    bad_gz = tmp / "vllm.log.gz"
    bad_gz.write_bytes(gzip.compress(b"x" * 10000)[:20])  # cut inside the header: nothing decompresses
    return {
        "empty trace": ["--replay", str(empty)],
        "binary trace": ["--replay", str(binary)],
        "wrong-shape trace": ["--replay", str(shape)],
        "unreadable log": ["--log", str(bad_gz)],
    }


@pytest.mark.parametrize("case", ["empty trace", "binary trace", "wrong-shape trace", "unreadable log"])
def test_once_exits_2_with_the_reason_when_its_only_file_source_failed(tmp_path, case):
    argv = _trace_cases(tmp_path)[case]
    done = kvset_top("--once", *argv)
    assert done.returncode == 2, done.stderr
    assert done.stdout.startswith("kvset-top report")  # the report is still printed
    [line] = [x for x in done.stderr.splitlines() if x.startswith("kvset-top: no data: ")]
    assert argv[1].rsplit("/", 1)[-1] in line and "failed" in line


def test_once_exits_2_when_the_metrics_endpoint_refuses_or_is_not_metrics():
    refused = kvset_top("--once", "--metrics", f"http://127.0.0.1:{free_port()}/metrics", "--duration", "1.5")
    assert refused.returncode == 2 and "connection refused" in refused.stderr
    engine = FakeEngine()
    try:
        engine.body, engine.content_type = b"<html><body>Not here</body></html>\n", "text/html"
        html = kvset_top("--once", "--metrics", engine.url, "--duration", "1.5")
    finally:
        engine.stop()
    assert html.returncode == 2
    assert "not a Prometheus metrics page (the server sent HTML)" in html.stderr
    # exiting: no retry is promised, and the reason is said once
    assert "retry in" not in html.stderr and html.stderr.count("not a Prometheus metrics page") == 1
    assert "invalid metric name" not in html.stdout + html.stderr


def test_once_exits_2_when_no_publisher_ever_answered():
    done = kvset_top("--once", "--events", f"tcp://127.0.0.1:{free_port()}", "--duration", "4")
    assert done.returncode == 2
    expected = "no publisher answered on tcp://127.0.0.1:"
    assert expected in done.stderr and "is the engine started with --kv-events-config?" in done.stderr
    # no event arrived: the report claims nothing about misses, and advises nothing already given
    assert "MISSES only" not in done.stdout and "add --events" not in done.stdout


def test_once_exits_0_when_one_source_delivered_and_another_failed():
    done = kvset_top(
        "--once",
        "--replay",
        str(MOONCAKE_TRACE),
        "--metrics",
        f"http://127.0.0.1:{free_port()}/",
        "--duration",
        "5",  # the replay delivers within a second or two; on a loaded machine 3 s was once too short
    )
    assert done.returncode == 0, done.stderr
    assert "no data" not in done.stderr


# -- --version and usage errors ---------------------------------------------------------------------
def test_version_of_both_commands():
    for module, prog in (("kvset", "kvset"), ("kvset_tui", "kvset-top")):
        done = run(module, "--version")
        assert done.returncode == 0 and done.stdout.strip() == f"{prog} 0.1.0"


@pytest.mark.parametrize(
    ("module", "argv", "start"),
    [
        ("kvset_tui", ["--speed", "fast"], "kvset-top: error: argument --speed: "),
        ("kvset_tui", ["--speed", "0"], "kvset-top: error: argument --speed: speed must be positive"),
        ("kvset_tui", ["--speed", "-1"], "kvset-top: error: argument --speed: speed must be positive"),
        ("kvset_tui", ["--no-such-flag"], "kvset-top: error: unrecognized arguments: --no-such-flag"),
        # --once reads a replay whole and plays a fixed stretch of the demo: a speed given would be ignored
        (
            "kvset_tui",
            ["--once", "--demo", "--speed", "5"],
            "kvset-top: error: --speed does not apply to --once",
        ),
        (
            "kvset",
            ["analyze", "--demo", "--log-from-end"],
            "kvset analyze: error: unrecognized arguments: --log-from",
        ),
        ("kvset", ["analyze", "--horizon", "x"], "kvset analyze: error: argument --horizon: "),
        ("kvset", ["frobnicate"], "kvset: error: argument COMMAND: invalid choice"),
        # an unknown flag of a subcommand names the subcommand, whose --help lists its flags
        (
            "kvset",
            ["analyze", "--demo", "--no-such-flag"],
            "kvset analyze: error: unrecognized arguments: --no-such-flag",
        ),
        (
            "kvset",
            ["verify", "--demo", "--no-such-flag"],
            "kvset verify: error: unrecognized arguments: --no-such-flag",
        ),
        ("kvset", ["--no-such-flag"], "kvset: error: unrecognized arguments: --no-such-flag"),
    ],
)
def test_a_usage_error_is_one_line_with_where_to_look(module, argv, start):
    done = run(module, *argv)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()  # no usage block before it
    prog = start.split(": error")[0]
    assert line.startswith(start) and line.endswith(f"(see {prog} --help)")


# -- recording targets --------------------------------------------------------------------------------
def test_recording_onto_the_replayed_input_is_refused_and_the_input_kept(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(MOONCAKE_TRACE.read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\n")
    before = trace.read_bytes()
    for extra in ([], ["--force"]):  # not even with --force
        done = kvset_top("--once", "--replay", str(trace), "--record", str(trace), *extra)
        assert done.returncode == 2
        [line] = done.stderr.splitlines()
        assert "refusing to record onto the input" in line
    assert trace.read_bytes() == before


def test_an_existing_record_target_needs_force_and_a_missing_folder_is_one_line(tmp_path):
    out = tmp_path / "rec.jsonl"
    out.write_text("keep me\n")
    refused = kvset_top("--once", "--replay", str(MOONCAKE_TRACE), "--record", str(out))
    assert refused.returncode == 2 and "exists: give --force" in refused.stderr
    assert out.read_text() == "keep me\n"
    forced = kvset_top("--once", "--replay", str(MOONCAKE_TRACE), "--record", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert out.read_text().count("\n") == MOONCAKE_TRACE.read_text().count("\n")  # every request recorded
    missing = kvset_top(
        "--once", "--replay", str(MOONCAKE_TRACE), "--record", str(tmp_path / "no" / "r.jsonl")
    )
    assert missing.returncode == 2
    [line] = missing.stderr.splitlines()
    assert "the folder" in line and "does not exist" in line


def test_kvset_record_onto_an_existing_file_is_one_line_not_a_traceback(tmp_path):
    out = tmp_path / "incident.jsonl"
    out.write_text("keep me\n")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    done = kvset("record", "--events", endpoint, "--out", str(out), "--seconds", "0.5")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("kvset record: ") and "exists: give --force" in line
    assert out.read_text() == "keep me\n"
    forced = kvset(
        "record", "--events", endpoint, "--out", str(out), "--seconds", "0.5", "--force", "--quiet"
    )
    assert forced.returncode == 1 and "Traceback" not in forced.stderr  # ran, and recorded nothing
    assert "nothing recorded" in forced.stderr


# -- inputs that are not what they should be ------------------------------------------------------------
def test_a_folder_given_as_a_log_or_trace_is_a_one_line_error(tmp_path):
    for done in (
        kvset_top("--once", "--log", str(tmp_path)),
        kvset_top("--log", str(tmp_path)),  # followed: a folder never becomes a log
        kvset_top("--once", "--replay", str(tmp_path)),
        kvset("analyze", "--log", str(tmp_path)),
        kvset("analyze", str(tmp_path)),
    ):
        assert done.returncode == 2
        [line] = done.stderr.splitlines()
        assert f"{tmp_path} is a folder" in line and "finished" not in line


def test_a_metrics_url_that_cannot_be_polled_is_a_one_line_error():
    done = kvset_top("--once", "--metrics", "ftp://127.0.0.1/metrics")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "only http:// and https://" in line


def test_verify_without_a_trace_names_itself():
    done = run("kvset", "verify")
    assert done.returncode == 2 and "no trace given: kvset verify TRACE" in done.stderr
