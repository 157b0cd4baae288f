"""`kvset analyze SHARDS... --workers N` as a user runs it: a LocalCluster of 2 processes gives the
report and JSON one process gives, plus how it was computed; flags that cannot distribute are refused.
In the end-to-end group: its clusters start real worker processes (about 30 s)."""

import json
import shutil

import pytest

from kvset.cli import main
from tests.support.paths import MOONCAKE_TRACE

pytest.importorskip("distributed")

# how it was computed, how long it took, when, and how fast (two one-process runs differ there too)
SAME_BUT = {"notes", "seconds", "taken_at", "accesses_per_second"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv):
    code, out, err = run(capsys, "analyze", *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def test_two_workers_give_the_one_process_json(capsys, tmp_path):
    trace = str(MOONCAKE_TRACE)
    one, _ = _json(capsys, trace)
    two, err = _json(capsys, trace, "--workers", "2", "--partitions", "5")
    assert {k for k in one if one[k] != two[k]} <= SAME_BUT
    assert one["windows"] == two["windows"] and one["churn"] == two["churn"]  # the time slots, merged
    how = two["notes"][-1]
    assert "local Dask cluster of 2" in how and "5 byte ranges" in how and "3 rounds" in how
    assert "5/5 partitions analysed, 4/4 merges (round 3/3)" in err
    # the same accesses as files, one per shard, in time order; and as a folder of them
    lines = MOONCAKE_TRACE.read_bytes().splitlines(keepends=True)
    shards = tmp_path / "shards"
    shards.mkdir()
    for k in range(3):
        (shards / f"part-{k}.jsonl").write_bytes(
            b"".join(lines[k * len(lines) // 3 : (k + 1) * len(lines) // 3])
        )
    one, _ = _json(capsys, trace)
    files, _ = _json(
        capsys, *(str(shards / f"part-{k}.jsonl") for k in (2, 0, 1)), "--workers", "2", "--time-order"
    )
    folder, _ = _json(capsys, str(shards), "--workers", "2")
    for other in (files, folder):
        assert {k for k in one if one[k] != other[k]} <= SAME_BUT | {"input"}
    assert "3 files in the order given, ordered by their first timestamps" in files["notes"][-1]


def test_text_report_says_how_it_was_computed(capsys):
    # one worker, two partitions: the merged state read as the analyzer the snapshot reads (this was a
    # traceback, AttributeError last_time_at); its text is one process's but for how it was computed
    code, out, err = run(capsys, "analyze", str(MOONCAKE_TRACE), "--workers", "1", "--partitions", "2")
    assert code == 0, err
    assert "Traceback" not in err
    assert "ordered merge of partial stacks" in out and "working sets" in out
    _, alone, _ = run(capsys, "analyze", str(MOONCAKE_TRACE))
    differ = [line for line in set(out.splitlines()) ^ set(alone.splitlines()) if line.strip()]
    assert differ and all(line.lstrip().startswith(("note:", "took ")) for line in differ), differ


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--workers", "2", "--sample-size", "1000"], "--sample-size lowers its rate"),
        (["--workers", "2", "--opt"], "--opt needs the whole trace"),
        (["--workers", "2", "--sample", "5%"], "a sampled run's time windows do not merge yet"),
        (["--partitions", "3"], "--partitions needs --workers or --dask"),
        ([str(MOONCAKE_TRACE)], "more than one trace needs --workers or --dask"),
        (["--dask", "tcp://127.0.0.1:9", "--dashboard"], "--dashboard is for --workers"),
    ],
)
def test_flags_that_do_not_distribute_are_refused_in_one_line(capsys, argv, message):
    code, out, err = run(capsys, "analyze", str(MOONCAKE_TRACE), *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_a_gzip_file_cannot_be_cut(capsys, tmp_path):
    gz = tmp_path / "t.jsonl.gz"
    with open(MOONCAKE_TRACE, "rb") as f, __import__("gzip").open(gz, "wb") as g:
        shutil.copyfileobj(f, g)
    code, _, err = run(capsys, "analyze", str(gz), "--workers", "2")
    assert code == 2 and "gzip-compressed" in err and err.count("\n") == 1


def _loaded_in_worker() -> tuple[bool, int]:
    import sys

    from kvset.core.partial_stack_merge import _resolve

    return "kvset.distributed.preload" in sys.modules, len(_resolve.signatures)


def test_local_workers_start_with_kvset_and_its_kernels_loaded():
    """Forked from a server that imported kvset and loaded the kernels (kvset.distributed.preload), a
    worker has the merge's kernel before its first task; the server ends with the cluster."""
    from multiprocessing import forkserver

    from kvset.distributed.driver import Cluster, _open
    from kvset.distributed.server import stop_worker_server

    client, local = _open(Cluster(workers=1))
    try:
        (loaded,) = client.run(_loaded_in_worker).values()
    finally:
        client.close()
        local.close()
        stop_worker_server()
    assert loaded[0] and loaded[1] >= 1
    assert forkserver._forkserver._forkserver_pid is None
