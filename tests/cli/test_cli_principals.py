"""`kvset analyze FILE --by ...`: the principals' JSON and text, checked against a naive LRU replay."""

import json
from collections import OrderedDict

import numpy as np
import pytest

from kvset.cli import main

PRINCIPAL_KEYS = [
    "by",
    "name",
    "accesses",
    "curve",
    "isolated_curve",
    "working_sets",
    "cache_share",
    "hit_share",
    "cache_blocks",
    "holds_more_than_it_earns",
    "turn_gap_seconds",
    "predicted_token_hit_rate",
]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


OFFSET = {"big": 1000, "small": 2000, "tiny": 3000, None: 4000}  # each tenant's own ids


def toy_requests(seed=7, n=300):
    """A system prompt every tenant shares, a big tenant with many ids, small ones, unnamed lines."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        tenant = rng.choice(["big", "small", "tiny", None], p=[0.55, 0.25, 0.1, 0.1])
        alphabet = 400 if tenant == "big" else 40
        own = [int(k) + OFFSET[tenant] for k in rng.integers(0, alphabet, int(rng.integers(1, 6)))]
        ids = [1, 2, 3] + own
        line = {"timestamp": i, "input_length": 16 * len(ids), "hash_ids": ids, "chat_id": i, "turn": 1}
        if tenant is not None:
            line["tenant"] = str(tenant)
        if i % 3 == 0:
            line["session"] = f"s{i % 5}"
        out.append(line)
    return out


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "tenants.jsonl"
    requests = toy_requests()
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    return str(path), requests


def naive_hits(requests, capacity, level_field):
    cache: OrderedDict[int, None] = OrderedDict()
    hits: dict[str, int] = {}
    for r in requests:
        owner = r.get(level_field, "(unknown)")
        for key in r["hash_ids"]:
            if key in cache:
                cache.move_to_end(key)
                hits[owner] = hits.get(owner, 0) + 1
            else:
                if len(cache) >= capacity:
                    cache.popitem(last=False)
                cache[key] = None
    return hits


def test_by_tenant_json_gives_each_tenants_curve_in_the_shared_cache(capsys, trace):
    path, requests = trace
    code, out, err = run_cli(
        capsys, "analyze", path, "--by", "tenant", "--json", "--capacities", "4,16,64,256"
    )
    assert code == 0, err
    report = json.loads(out)
    rows = report["principals"]
    assert all(list(r) == PRINCIPAL_KEYS for r in rows)
    assert all(r["predicted_token_hit_rate"] is None for r in rows)  # a trace has no engine model
    assert [r["name"] for r in rows] == ["big", "small", "tiny", "(unknown)"]  # most accesses first
    accesses = {r["name"]: r["accesses"] for r in rows}
    assert sum(accesses.values()) == report["accesses"]
    for capacity in (4, 16, 64, 256):
        hits = naive_hits(requests, capacity, "tenant")
        for r in rows:
            (row,) = [c for c in r["curve"] if c["capacity_blocks"] == capacity]
            assert row["block_hit_rate"] == pytest.approx(hits.get(r["name"], 0) / r["accesses"])
    assert [c["capacity_blocks"] for c in rows[0]["isolated_curve"]] == [4, 16, 64, 256]
    assert sum(r["hit_share"] for r in rows) == pytest.approx(1.0)
    # the pool replayed at the knee (no engine, no --capacity): the shares of what it held
    pool = report["principals_pool"]
    assert pool["capacity_source"] == "knee" and "LRU" in pool["model"]
    assert sum(r["cache_share"] for r in rows) == pytest.approx(1.0)
    assert [d["by"] for d in pool["displacement"]] == ["tenant"]
    assert rows[0]["working_sets"][0]["target"] == 0.95


def test_top_principals_sums_the_rest_and_levels_may_be_given_twice(capsys, trace):
    path, _ = trace
    code, out, err = run_cli(
        capsys, "analyze", path, "--by", "tenant", "--by", "session", "--top-principals", "2", "--json"
    )
    assert code == 0, err
    rows = json.loads(out)["principals"]
    tenants = [r["name"] for r in rows if r["by"] == "tenant"]
    sessions = [r["name"] for r in rows if r["by"] == "session"]
    assert tenants == ["big", "small", "(other)"]
    assert sessions[0] == "(unknown)" and sessions[-1] == "(other)" and len(sessions) == 3
    other = rows[-1]
    assert other["isolated_curve"] is None and other["working_sets"] == [] and other["curve"]


def test_by_text_report_and_bad_levels(capsys, trace):
    path, _ = trace
    code, out, _ = run_cli(capsys, "analyze", path, "--by", "tenant,adapter")
    assert code == 0
    assert "principals by tenant" in out and "principals by adapter" in out
    code, _, err = run_cli(capsys, "analyze", path, "--by", "customer")
    assert code == 2 and "--by takes tenant, session, adapter" in err and "Traceback" not in err


def test_no_prefix_matching_of_long_flags(capsys, trace):
    path, _ = trace
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", path, "--bytes-per-tok", "4096"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bytes-per-tok" in capsys.readouterr().err


def test_without_by_principals_are_null(capsys, trace):
    path, _ = trace
    code, out, _ = run_cli(capsys, "analyze", path, "--json")
    report = json.loads(out)
    assert code == 0 and report["principals"] is None and report["principals_pool"] is None


def test_by_csv_has_a_row_per_principal_and_capacity(capsys, trace):
    import csv
    import io

    path, requests = trace
    code, out, err = run_cli(capsys, "analyze", path, "--by", "tenant", "--csv", "--capacities", "4,64")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["principal"], r["capacity_blocks"]) for r in rows[:2]] == [("big", "4"), ("big", "64")]
    assert len(rows) == 2 * 4  # big, small, tiny, (unknown)
    hits = naive_hits(requests, 64, "tenant")
    for r in rows:
        if r["capacity_blocks"] == "64":
            assert float(r["block_hit_rate"]) == pytest.approx(
                hits.get(r["principal"], 0) / int(r["accesses"])
            )


def test_by_text_names_the_flood_that_displaces_the_others(capsys, tmp_path):
    # two tenants take turns re-reading their own 6 blocks, each turn followed by a flood of 40 new
    # ones: whoever comes back finds its blocks pushed out by the flood. One in 4 of the tenants'
    # turns is twice in a row (a hit): a hit share for the flood's to be measured against.
    lines = []
    for i in range(300):
        if i % 3:
            own, tenant = [100_000 + 20 * i + j for j in range(20)], "flood"
        else:
            tenant = "a" if (i // 3) % 2 else "b"
            own = [(1000 if tenant == "a" else 2000) + j for j in range(6)] * (2 if i % 4 == 0 else 1)
        lines.append(
            {"timestamp": i * 1000, "input_length": 16 * len(own), "hash_ids": own, "tenant": tenant}
        )
    path = tmp_path / "flood.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = run_cli(capsys, "analyze", str(path), "--by", "tenant", "--capacity", "24", "--opt")
    assert code == 0, err
    assert "top displacer: flood" in out
    assert "a model (LRU of the pool's size" in out
    flood = next(
        line for line in out.splitlines() if line.startswith("flood ")
    )  # its row, then its matrix row
    assert flood.rstrip().split()[-3] == "!"  # it holds more of the cache than its hits earn


def test_kvset_top_once_by_tenant_gives_what_analyze_gives(capsys, trace):
    from kvset_tui.cli import main as top_main

    path, _ = trace
    code, out, err = run_cli(capsys, "analyze", path, "--by", "tenant", "--json")
    assert code == 0, err
    offline = json.loads(out)
    code = top_main(["--once", "--json", "--replay", path, "--by", "tenant"])
    live = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["name"], r["accesses"], r["cache_share"]) for r in live["principals"]] == [
        (r["name"], r["accesses"], r["cache_share"]) for r in offline["principals"]
    ]
    assert live["principals_pool"]["displacement"] == offline["principals_pool"]["displacement"]


def test_kvset_top_by_window_says_the_span_its_figures_cover(capsys, trace):
    from kvset_tui.cli import main as top_main

    path, _ = trace
    code, out, err = run_cli(capsys, "analyze", path, "--by", "tenant", "--json")
    assert code == 0, err
    whole = json.loads(out)["principals_window"]
    total = whole["accesses"]
    assert (whole["window_accesses"], whole["whole_stream"], whole["stream_accesses"]) == (None, True, total)
    code, out, err = run_cli(capsys, "analyze", path, "--by", "tenant")
    assert code == 0 and "principals over" not in out  # a file read whole: its figures are of all of it

    window = total // 3
    assert top_main(["--once", "--json", "--replay", path, "--by", "tenant", "--by-window", str(window)]) == 0
    report = json.loads(capsys.readouterr().out)
    span = report["principals_window"]
    assert (span["accesses"], span["stream_accesses"], span["window_accesses"]) == (window, total, window)
    assert span["whole_stream"] is False and 0 < span["seconds"] < whole["seconds"]
    assert sum(r["accesses"] for r in report["principals"]) == window
    assert top_main(["--once", "--replay", path, "--by", "tenant", "--by-window", str(window)]) == 0
    assert f"principals over the last {window:,} accesses of {total:,}" in capsys.readouterr().out

    # a window the stream does not fill: its figures are of the whole stream so far, and say so
    assert top_main(["--once", "--replay", path, "--by", "tenant", "--by-window", str(2 * total)]) == 0
    assert f"principals over all {total:,} accesses so far" in capsys.readouterr().out


def test_by_window_is_for_live_commands_and_a_positive_count(capsys, trace):
    from kvset_tui.cli import main as top_main

    path, _ = trace
    for run in (
        lambda: main(["analyze", path, "--by", "tenant", "--by-window", "10"]),  # it keeps the whole file
        lambda: top_main(["--once", "--replay", path, "--by", "tenant", "--by-window", "0"]),
    ):
        with pytest.raises(SystemExit) as exit_:
            run()
        assert exit_.value.code == 2 and "--by-window" in capsys.readouterr().err


def test_the_past_cap_note_follows_the_table_not_a_principal_named_like_it(capsys, tmp_path, monkeypatch):
    from kvset.types import PAST_NAME_CAP, PrincipalNames

    path = tmp_path / "named.jsonl"
    requests = toy_requests()
    for r in requests[::4]:
        r["session"] = PAST_NAME_CAP  # a stream may name a session so: it is an ordinary name then
    path.write_text("".join(json.dumps(r) + "\n" for r in requests))
    code, out, _ = run_cli(capsys, "analyze", str(path), "--by", "session")
    assert code == 0 and f"  {PAST_NAME_CAP}" in out  # its row
    assert "names was full" not in out
    # a table of 2 names: every other session comes past it, and the note says the table's own cap
    monkeypatch.setattr(PrincipalNames.__init__, "__defaults__", (2,))
    code, out, _ = run_cli(capsys, "analyze", str(path), "--by", "session")
    assert code == 0
    [note] = [line for line in out.splitlines() if "names was full" in line]
    assert "table of 2 names" in note and note.startswith(f"  {PAST_NAME_CAP}: ")
