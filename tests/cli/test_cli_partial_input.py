"""A truncated .gz is a partial read: `kvset analyze` and `kvset verify` say so on stderr and exit with
code 3, printing no figure; with --allow-partial they print the figures of the whole lines read
before the damage, the same as those of a file holding only those lines."""

import gzip
import json
import zlib

import pytest

from kvset.cli import main
from kvset.cli.inputs import EXIT_PARTIAL
from tests.support.paths import MOONCAKE_TRACE

SAME_BUT = {"input", "notes", "seconds", "rejected_total", "rejections", "taken_at", "accesses_per_second"}


@pytest.fixture(scope="module")
def truncated(tmp_path_factory):
    """The Mooncake trace gzipped and cut at two thirds of its bytes, and the lines it still holds."""
    folder = tmp_path_factory.mktemp("partial")
    whole = gzip.compress(MOONCAKE_TRACE.read_bytes())
    cut = folder / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    readable = zlib.decompressobj(wbits=31).decompress(cut.read_bytes())
    lines = readable[: readable.rindex(b"\n") + 1]  # a partial last line is not a request
    prefix = folder / "prefix.jsonl"
    prefix.write_bytes(lines)
    return cut, prefix, lines.count(b"\n")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["analyze", "verify"])
def test_a_truncated_gzip_exits_3_with_the_reason_on_stderr_and_no_figures(capsys, truncated, command):
    cut, _, lines = truncated
    code, out, err = run(capsys, command, str(cut))
    assert code == EXIT_PARTIAL == 3 and out == ""
    assert err.count("\n") == 1 and "ends early" in err and f"line {lines + 1}" in err
    assert "--allow-partial" in err


def test_allow_partial_gives_the_figures_of_the_lines_read(capsys, truncated):
    cut, prefix, lines = truncated
    code, out, err = run(capsys, "analyze", str(cut), "--json", "--allow-partial")
    assert code == 0 and "partial input" in err and f"{lines:,} requests" in err
    partial = json.loads(out)
    code, out, _ = run(capsys, "analyze", str(prefix), "--json")
    assert code == 0
    whole_lines = json.loads(out)
    assert partial["requests"] == lines
    assert {k for k in partial if partial[k] != whole_lines[k]} <= SAME_BUT


def test_a_whole_gzip_exits_0(capsys, tmp_path):
    whole = tmp_path / "whole.jsonl.gz"
    whole.write_bytes(gzip.compress(MOONCAKE_TRACE.read_bytes()))
    code, _, err = run(capsys, "analyze", str(whole))
    assert code == 0 and "ends early" not in err


def test_random_bytes_named_gz_are_called_not_gzip(capsys, tmp_path):
    noise = tmp_path / "noise.jsonl.gz"
    noise.write_bytes(bytes(range(256)) * 8)
    code, _, err = run(capsys, "analyze", str(noise))
    assert code == 2 and err.startswith(f"kvset analyze: {noise} is named .gz but is not gzip")
    plain = tmp_path / "plain.jsonl.gz"  # a plain trace misnamed .gz is still read
    plain.write_bytes(MOONCAKE_TRACE.read_bytes())
    assert run(capsys, "analyze", str(plain))[0] == 0
