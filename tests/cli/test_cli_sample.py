"""--sample, --sample-size and --seed as a user runs them: every sampled number says it is an estimate."""

import json
import warnings

import pytest

from kvset.cli import main
from kvset_tui.cli import main as top_main
from tests.support.paths import MOONCAKE_TRACE


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_json_of_a_sample_carries_the_estimate_and_its_error_bounds(capsys):
    code, out, _ = run(
        capsys,
        "analyze",
        str(MOONCAKE_TRACE),
        "--sample",
        "10%",
        "--seed",
        "4",
        "--json",
        "--capacities",
        "1000,10000,40000",
    )
    assert code == 0
    r = json.loads(out)
    est = r["estimate"]
    assert (est["sample_rate"], est["seed"], est["sample_size"]) == (0.1, 4, None)
    assert (
        est["tracked_blocks"] > 0
        and 0.1 < est["tracked_share"] < 1
        and "standard errors" in est["error_bound"]
    )
    assert r["accesses"] == 121_877 and r["requests"] == 3_993  # counted, not estimated
    for row in r["curve"]:
        assert 0 < row["block_hit_rate_error"] < 0.1 and 0 < row["token_hit_rate_error"] < 0.1
    exact = json.loads(
        run(capsys, "analyze", str(MOONCAKE_TRACE), "--json", "--capacities", "1000,10000,40000")[1]
    )
    assert exact["estimate"] is None and "block_hit_rate_error" not in exact["curve"][0]
    for sampled, measured in zip(r["curve"], exact["curve"], strict=True):
        assert abs(sampled["block_hit_rate"] - measured["block_hit_rate"]) < 0.03
    for ws in [w for w in r["working_sets"] if w["window"] == "all"]:
        assert ws["capacity_blocks_low"] <= ws["capacity_blocks"] <= ws["capacity_blocks_high"]


def test_analyze_text_of_a_fixed_size_sample_says_estimate(capsys):
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample-size", "5000")
    assert code == 0
    assert "ESTIMATE from a" in out and "at most 5,000 blocks" in out and "±" in out
    assert "range (blocks)" in out and "exact at every capacity" not in out


@pytest.mark.parametrize(
    "flags",
    [
        ["--sample", "0"],
        ["--sample", "1.5"],
        ["--sample", "0.1,0.2"],
        ["--sample", "0.1", "--sample-size", "10"],
        ["--sample-size", "0"],
    ],
)
def test_bad_sampling_flags_are_one_line_usage_errors(capsys, flags):
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(MOONCAKE_TRACE), *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("--sample" in err or "sample rate" in err)


def test_kvset_top_once_json_of_a_sample_labels_the_snapshot(capsys):
    assert (
        top_main(["--once", "--json", "--replay", str(MOONCAKE_TRACE), "--sample", "0.1", "--seed", "2"]) == 0
    )
    snap = json.loads(capsys.readouterr().out)
    assert snap["estimate"]["sample_rate"] == 0.1 and snap["estimate"]["seed"] == 2
    assert all(w["estimate"] for w in snap["windows"].values())
    assert snap["accesses"] == 121_877
    assert "block_hit_rate_error" in snap["curve"][0]
    assert top_main(["--once", "--replay", str(MOONCAKE_TRACE), "--sample", "0.1"]) == 0
    assert "ESTIMATE from a 10 % spatial sample" in capsys.readouterr().out


def test_analyze_csv_of_a_sample_marks_every_row_an_estimate(capsys):
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample", "0.1", "--csv")
    assert code == 0
    header, *rows = [line.split(",") for line in out.splitlines()]
    est, err = header.index("estimate"), header.index("block_hit_rate_error")
    assert rows and all(r[est] == "1" and float(r[err]) >= 0 for r in rows)
    exact = [
        line.split(",") for line in run(capsys, "analyze", str(MOONCAKE_TRACE), "--csv")[1].splitlines()[1:]
    ]
    assert all(r[est] == "0" and r[err] == "" for r in exact)


@pytest.mark.parametrize("sampling", [["--sample-size", "2"], ["--sample", "1e-9"], ["--sample-size", "40"]])
def test_a_sample_too_small_to_mean_anything_says_so_and_gives_no_interval(capsys, sampling):
    from kvset.core.curve import MIN_SAMPLE_BLOCKS

    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), *sampling, "--json")
    assert code == 0
    r = json.loads(out)
    assert r["estimate"]["tracked_blocks"] < MIN_SAMPLE_BLOCKS and r["estimate"]["meaningful"] is False
    assert r["estimate"]["error_bound"] is None
    assert all(p.get("block_hit_rate_error") is None for p in r["curve"])
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), *sampling)
    assert "NOT MEANINGFUL" in out and "±" not in out


def test_a_sample_large_enough_keeps_its_interval(capsys):
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample", "0.2", "--json")
    r = json.loads(out)
    assert r["estimate"]["meaningful"] is True and r["estimate"]["error_bound"]
    assert any(p.get("block_hit_rate_error") for p in r["curve"])


@pytest.mark.parametrize("rate", ["1e-300", "1e-13"])
def test_a_sample_rate_too_thin_to_weigh_is_refused_in_one_line(capsys, rate):
    """A sampled block weighs 1 / rate in int64 fixed point: the rate is refused, not overflowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning on the cast fails the test
        with pytest.raises(SystemExit) as exc:
            main(["analyze", str(MOONCAKE_TRACE), "--sample", rate])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--sample: sample rate must lie in [1e-12, 1]" in err and len(err.strip().splitlines()) == 1


def test_a_tiny_sample_rate_is_labelled_with_its_value_not_zero(capsys):
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample", "1e-9")
    assert code == 0 and "ESTIMATE from a 1e-07 % spatial sample" in out and " 0 % spatial" not in out


def _cut_mooncake(path, requests: int = 4_000, request_blocks: int = 32) -> None:
    """A Mooncake file whose hash ids are not prefix-chained: popular blocks anywhere in a request."""
    import numpy as np

    from tests.support.cut_traces import cut_trace

    keys, _ = cut_trace(np.random.default_rng(1), requests * request_blocks, 20_000, request_blocks)
    ids = (keys >> np.uint64(40)).tolist()  # small ids, one per key
    with open(path, "w") as out:
        for r in range(requests):
            blocks = ids[r * request_blocks : (r + 1) * request_blocks]
            line = {
                "timestamp": r,
                "input_length": 512 * request_blocks,
                "output_length": 1,
                "hash_ids": blocks,
            }
            out.write(json.dumps(line) + "\n")


def test_a_sample_of_keys_that_are_not_prefix_chained_says_the_head_boost_is_dropped(capsys, tmp_path):
    trace = tmp_path / "cut.jsonl"
    _cut_mooncake(trace)
    code, out, _ = run(capsys, "analyze", str(trace), "--sample", "5%", "--json")
    assert code == 0
    est = json.loads(out)["estimate"]
    assert est["head_boost"] is False and est["positions_moved_share"] > 0.1
    assert "not boosted" in est["method"]
    code, out, _ = run(capsys, "analyze", str(trace), "--sample", "5%")
    assert "request heads NOT sampled more" in out and "block positions vary (keys not prefix-chained" in out
    # a real prefix-chained trace keeps the boost, and says nothing of positions
    code, out, _ = run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample", "5%", "--json")
    est = json.loads(out)["estimate"]
    assert est["head_boost"] is True and "boosted request heads" in est["method"]
    assert "block positions vary" not in run(capsys, "analyze", str(MOONCAKE_TRACE), "--sample", "5%")[1]
