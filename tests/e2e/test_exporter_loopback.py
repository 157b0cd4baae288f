"""End to end: the real `kvset serve` replaying the Mooncake trace, scraped over 127.0.0.1 during and
after the replay; every figure equals what `kvset analyze --json` says of the same file. And nothing
listens but the one address asked for (none at all with --textfile)."""

from __future__ import annotations

import os
import time

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from kvset.core import LIVE_HORIZON
from kvset.exporter.collector import stack_distance_edges
from tests.support.engine_metrics_server import FakeEngine
from tests.support.kvset_serve import (
    KvsetServe,
    analyze_json,
    listening_sockets,
    parse_exposition,
    sample,
    series,
)
from tests.support.paths import MOONCAKE_TRACE

TRACE = str(MOONCAKE_TRACE)
CAPACITIES = "100,1000,1024,10000"  # 1024 is also a bucket edge
ACCESSES = 121_877  # the trace's block accesses


def _check_consistent(s) -> None:
    """What every scrape must hold, whenever it was taken: one snapshot, not parts of two."""
    total = sample(s, "kvset_accesses_total")
    buckets = sorted((float(lab["le"]), v) for lab, v in series(s, "kvset_stack_distance_blocks_bucket"))
    assert buckets[-1] == (float("inf"), total) and sample(s, "kvset_stack_distance_blocks_count") == total
    counts = [v for _, v in buckets]
    assert counts == sorted(counts)
    hits_at = dict(buckets)
    for lab, v in series(s, "kvset_hit_rate"):
        if lab["window"] == "all" and lab["unit"] == "blocks" and float(lab["capacity_blocks"]) in hits_at:
            assert v == pytest.approx(hits_at[float(lab["capacity_blocks"])] / total)


def test_scrapes_during_and_after_a_replay_equal_kvset_analyze():
    args = [
        "--replay",
        TRACE,
        "--speed",
        "250",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0.2",
        "--capacities",
        CAPACITIES,
        "--tiers",
        "5000,20000",
    ]
    with KvsetServe(*args) as serve:

        def finished(s):
            return sample(s, "kvset_accesses_total") == ACCESSES and series(s, "kvset_source_up")[0][1] == 0

        scrapes = [s for s in serve.scrape_until(finished, timeout=90) if s]
        final = serve.scrape()
    during = [s for s in scrapes if 0 < sample(s, "kvset_accesses_total") < ACCESSES]
    assert during, "no scrape caught the replay in progress"
    totals = [sample(s, "kvset_accesses_total") for s in scrapes]
    assert totals == sorted(totals)  # a counter: never backwards
    for s in [*scrapes, final]:
        _check_consistent(s)

    edges = stack_distance_edges(LIVE_HORIZON)  # kvset serve's default horizon
    offline = analyze_json(
        TRACE, "--capacities", ",".join(str(e) for e in edges) + "," + CAPACITIES, "--tiers", "5000,20000"
    )
    assert sample(final, "kvset_accesses_total") == offline["accesses"] == ACCESSES
    assert sample(final, "kvset_first_time_blocks_total") == offline["distinct_blocks"]
    assert sample(final, "kvset_beyond_horizon_total") == offline["beyond_horizon"]
    curve = {p["capacity_blocks"]: p for p in offline["curve"]}
    for edge in edges:  # the histogram is the curve: bucket le=C holds the hits at C blocks
        le = next(
            lab["le"]
            for lab, _ in series(final, "kvset_stack_distance_blocks_bucket")
            if float(lab["le"]) == edge
        )
        assert sample(final, "kvset_stack_distance_blocks_bucket", le=le) == round(
            curve[edge]["block_hit_rate"] * ACCESSES
        )
    for cap in (100, 1000, 10000):
        for unit in ("blocks", "tokens"):
            got = sample(final, "kvset_hit_rate", capacity_blocks=str(cap), unit=unit, window="all")
            assert got == pytest.approx(curve[cap][f"{unit[:-1]}_hit_rate"], rel=1e-12), (cap, unit)
    assert sample(final, "kvset_attainable_hit_rate", unit="blocks", window="all") == pytest.approx(
        offline["attainable_hit_rate"]
    )
    assert sample(final, "kvset_attainable_hit_rate", unit="tokens", window="all") == pytest.approx(
        offline["attainable_token_hit_rate"]
    )
    absolute = analyze_json(TRACE, "--target-mode", "absolute", "--targets", "0.5,0.7,0.9")
    for report in (offline, absolute):
        for ws in [w for w in report["working_sets"] if w["window"] == "all"]:
            got = sample(
                final, "kvset_working_set_blocks", target=repr(ws["target"]), mode=ws["mode"], window="all"
            )
            assert got == ws["capacity_blocks"], ws  # None both ways where not reached
    for tier in offline["tiers"]:
        assert sample(final, "kvset_tier_hit_rate", tier=str(tier["tier"])) == pytest.approx(
            tier["block_hit_rate"]
        )
    assert serve.proc.returncode == 0  # SIGTERM stops it cleanly


def test_only_the_address_asked_for_listens_and_its_host_defaults_to_loopback():
    engine = FakeEngine()  # a /metrics source: kvset polls it as a client, it must not listen for it
    try:
        with KvsetServe(
            "--replay", TRACE, "--speed", "max", "--metrics", engine.url, "--listen", "0"
        ) as serve:
            port = int(serve.url.rsplit(":", 1)[1].split("/")[0])
            assert serve.url == f"http://127.0.0.1:{port}/metrics"
            serve.scrape_until(lambda s: sample(s, "kvset_accesses_total") == ACCESSES)
            assert listening_sockets(serve.proc.pid) == [("tcp", "127.0.0.1", port)]
    finally:
        engine.stop()


def test_textfile_only_listens_nowhere_and_is_always_whole(tmp_path):
    target = tmp_path / "kvset.prom"
    with KvsetServe(
        "--replay",
        TRACE,
        "--speed",
        "250",
        "--textfile",
        str(target),
        "--interval",
        "0.2",
        wait_for_url=False,
    ) as serve:
        serve.wait_for_stderr("writing .* every refresh")
        deadline, reads, last = time.monotonic() + 90, 0, None
        while time.monotonic() < deadline:
            if target.exists():
                s = parse_exposition(target.read_text())  # read while it is rewritten: always a whole file
                _check_consistent(s)
                reads += 1
                last = sample(s, "kvset_accesses_total")
                if last == ACCESSES:
                    break
            time.sleep(0.02)
        assert last == ACCESSES and reads > 5
        assert listening_sockets(serve.proc.pid) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kvset.prom"]  # no temporary file left behind
    assert target.stat().st_mode & 0o777 == 0o644


def test_input_text_in_labels_is_escaped_and_prometheus_openmetrics_parses_it(tmp_path):
    # a file name with a quote, a backslash, a newline, an ANSI escape and a byte that is not UTF-8
    raw_name = b'odd"name\\ with\nnewline \x1b[31m red \xff.jsonl'
    trace = tmp_path / os.fsdecode(raw_name)
    trace.write_text("".join(MOONCAKE_TRACE.read_text().splitlines(keepends=True)[:200]) + "{not json\n")
    with KvsetServe(
        "--replay",
        os.fsdecode(os.fsencode(tmp_path) + b"/" + raw_name),
        "--speed",
        "max",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "0.2",
    ) as serve:
        finished = lambda s: series(s, "kvset_rejected_total") and series(s, "kvset_source_up")[0][1] == 0  # noqa: E731
        serve.scrape_until(finished)  # then every scrape is of the same final snapshot
        body = httpx.get(serve.url, timeout=5).content
        openmetrics = httpx.get(serve.url, timeout=5, headers={"Accept": "application/openmetrics-text"}).text
    text = body.decode("utf-8")  # valid UTF-8 whatever the input held
    assert "\x1b" not in text and "\r" not in text
    ((labels, up),) = series(parse_exposition(text), "kvset_source_up")
    assert labels["kind"] == "replay"
    assert labels["address"].endswith('/odd"name\\ with\\nnewline \\x1b[31m red \\udcff.jsonl')
    ((rej_labels, count),) = series(parse_exposition(text), "kvset_rejected_total")
    assert rej_labels == {**labels, "code": "not_json"} and count == 1
    ((reason_labels, _),) = series(parse_exposition(text), "kvset_rejection_reason_info")
    assert reason_labels == {**rej_labels, "reason": "not JSON"}
    strict = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in openmetrics_families(openmetrics)
        for s in f.samples
    }
    assert strict[("kvset_source_up", tuple(sorted(labels.items())))] == up
    assert strict[("kvset_accesses_total", ())] == sample(parse_exposition(text), "kvset_accesses_total")
