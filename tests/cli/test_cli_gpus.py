"""Working sets in GPUs (--gpu / --gpu-memory, --tp, --kv-fraction, --weights): the rows of
`kvset analyze` (text and JSON) and `kvset-top --once`, what they say they assumed, and the flags that
make no sense refused in one line (exit 2, no traceback)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from kvset.cli import main
from kvset_tui.cli import main as top_main
from tests.support.paths import MOONCAKE_TRACE

H100 = 81_559 * 2**20
DEMO = ["analyze", "--demo", "--demo-accesses", "20000", "--model", "llama-3.1-70b"]


def run(command, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = command(argv)
        except SystemExit as exit_:
            code = exit_.code
    return int(code or 0), out.getvalue(), err.getvalue()


def test_each_row_is_its_bytes_over_one_gpus_kv_share():
    code, out, _ = run(main, [*DEMO, "--gpu", "H100", "--tp", "4", "--weights", "140GB", "--json"])
    assert code == 0
    report = json.loads(out)
    kv_per_gpu = int(0.9 * H100) - 35 * 10**9  # vLLM's 90 %, less a quarter of the weights
    budget = report["gpu_budget"]
    assert budget["gpu"] == "H100" and budget["tp"] == 4 and budget["kv_bytes_per_gpu"] == kv_per_gpu
    assert budget["estimate"] is True and budget["lower_bound"] is False
    rows = [r for r in report["working_sets"] if r["reached"]]
    assert rows and all(r["gpus"] == pytest.approx(r["capacity_bytes"] / kv_per_gpu) for r in rows)


def test_without_a_gpu_there_are_no_gpus():
    code, out, _ = run(main, [*DEMO, "--json"])
    report = json.loads(out)
    assert code == 0 and report["gpu_budget"] is None
    assert {r["gpus"] for r in report["working_sets"]} == {None}


def test_the_text_table_has_a_gpus_column_and_says_what_it_assumed():
    code, out, _ = run(main, [*DEMO, "--gpu", "h100"])
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("target"))
    assert header.split()[:5] == ["target", "blocks", "tokens", "GiB", "GPUs"]
    assert "≥" in out.split(header)[1].splitlines()[2]  # weights not given: at least this many
    assert "GPUs (a model): H100 79.6 GiB, 71.7 GiB of KV each" in out and "weights not counted" in out


def test_once_counts_the_working_sets_in_gpus_of_a_given_memory():
    argv = ["--once", "--replay", str(MOONCAKE_TRACE), "--model", "llama-3.1-8b"]
    code, out, err = run(top_main, [*argv, "--gpu-memory", "80GiB", "--kv-fraction", "50%"])
    assert code == 0, err
    assert "GPUs (a model): GPU 80 GiB, 40 GiB of KV each (--kv-fraction 50 %)" in out
    assert "GPUs" in next(line for line in out.splitlines() if line.startswith("target"))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--gpu", "H900"], "unknown GPU 'H900' (known: H100, H200, B200, MI300X"),
        (["--gpu", "H100", "--gpu-memory", "80GB"], "give --gpu or --gpu-memory, not both"),
        (["--tp", "4"], "--tp needs --gpu or --gpu-memory"),
        (["--kv-fraction", "0.4"], "--kv-fraction needs --gpu or --gpu-memory"),
        (["--gpu", "H100", "--kv-fraction", "0.4", "--weights", "1GB"], "give --kv-fraction or --weights"),
        (["--gpu", "H100", "--kv-fraction", "0"], "must lie in (0, 1]"),
        (["--gpu", "H100", "--kv-fraction", "0.4,0.5"], "--kv-fraction takes one share"),
        (
            ["--gpu", "H100", "--weights", "200GB"],
            "no room for KV in 90 % of one H100's 79.6 GiB; raise --tp",
        ),
        (["--gpu", "H100", "--tp", "0"], "argument --tp: must be at least 1"),
        (["--gpu-memory", "lots"], "argument --gpu-memory: not a byte quantity"),
    ],
)
def test_nonsense_is_refused_in_one_line(flags, says):
    code, out, err = run(main, [*DEMO, *flags])
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", [main, top_main])
def test_gpus_without_the_kv_bytes_are_refused(command):
    argv = [*DEMO[:3], "1000"] if command is main else ["--once", "--demo"]
    code, _, err = run(command, [*argv, "--gpu", "H100"])
    assert code == 2 and "working sets in GPUs need the KV bytes per block; give --model" in err
