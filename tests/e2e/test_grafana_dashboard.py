"""contrib/grafana/kvset-dashboard.json asks only for what kvset exports: every metric and label its
queries name is in the scrapes of real `kvset serve` runs (a replay with a bad line, an engine's
/metrics, a model, tiers and --by tenant; and two data-parallel ranks' KV events, so that every metric has series)."""

from __future__ import annotations

import json
import re

import pytest

from tests.support.engine_metrics_server import FakeEngine
from tests.support.kvset_serve import KvsetServe, sample, series
from tests.support.paths import MOONCAKE_TRACE, ROOT
from tests.support.vllm_publisher import FakeVllmPublisher

DASHBOARD = ROOT / "contrib" / "grafana" / "kvset-dashboard.json"
SELECTOR = re.compile(r"\b(kvset_[a-z0-9_]+)(?:\{([^}]*)\})?")
LABEL = re.compile(r"([a-z_]+)\s*(?:=~|!~|!=|=)")
GROUPED = re.compile(r"by \(([^)]*)\)\s*\((?:\s*\w+\()?\s*(kvset_[a-z0-9_]+)")
ADDED_BY_PROMETHEUS = {"instance", "job"}


def _panels(items):
    for p in items:
        yield p
        yield from _panels(p.get("panels", []))


def _queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in _panels(dashboard["panels"]) for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            exprs.append(var["definition"])
    return exprs


def test_the_dashboard_is_grafana_json_with_one_datasource_variable():
    d = json.loads(DASHBOARD.read_text())
    panels = list(_panels(d["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and d["uid"] and d["schemaVersion"] >= 36
    assert any(v["type"] == "datasource" and v["query"] == "prometheus" for v in d["templating"]["list"])
    for p in panels:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] == "${datasource}" and t["expr"].strip()


def ranks_scrape():
    """A scrape of `kvset serve` over two data-parallel ranks with --capacity: the rank and pooling metrics."""
    with (
        FakeVllmPublisher(rank=0) as rank0,
        FakeVllmPublisher(rank=1) as rank1,
        KvsetServe(
            "--events",
            rank0.endpoint,
            "--events",
            rank1.endpoint,
            "--capacity",
            "4",
            "--interval",
            "0.2",
            "--listen",
            "127.0.0.1:0",
        ) as serve,
    ):
        for p in (rank0, rank1):
            p.wait_for_subscriber(timeout=30)
        for i in range(20):
            p = (rank0, rank1)[i % 2]
            p.publish([p.stored([1, 2, 3 + i % 5])])
        return serve.scrape_until(lambda s: sample(s, "kvset_pooling_gain", unit="blocks") is not None)[-1]


def test_every_metric_and_label_the_dashboard_queries_is_exported(tmp_path):
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(MOONCAKE_TRACE.read_text() + "this line is not JSON\n")
    engine = FakeEngine()
    engine.queries, engine.hits = 1000.0, 0.0
    try:
        with KvsetServe(
            "--replay",
            str(damaged),
            "--speed",
            "max",
            "--metrics",
            engine.url,
            "--metrics-interval",
            "0.2",
            "--model",
            "llama-3.1-70b",
            "--tiers",
            "80GiB,512GiB",
            "--capacities",
            "1000,10000",
            "--by",
            "tenant",
            "--interval",
            "0.2",
            "--listen",
            "127.0.0.1:0",
        ) as serve:
            serve.scrape_until(lambda s: sample(s, "kvset_engine_capacity_blocks") is not None)
            engine.queries, engine.hits = 3000.0, 1500.0  # the engine hits 75 % of what came since
            s = serve.scrape_until(
                lambda s: (
                    sample(s, "kvset_engine_token_hit_rate") is not None and series(s, "kvset_rejected_total")
                )
            )[-1]
    finally:
        engine.stop()
    assert sample(s, "kvset_engine_token_hit_rate") == pytest.approx(0.75)
    exported: dict[str, set[str]] = {}
    for (name, labels), _ in [*s.items(), *ranks_scrape().items()]:
        exported.setdefault(name, set()).update(k for k, _ in labels)
    asked = 0
    for expr in _queries(json.loads(DASHBOARD.read_text())):
        for name, matchers in SELECTOR.findall(expr):
            assert name in exported, f"the dashboard queries {name}, which kvset does not export: {expr}"
            labels = set(LABEL.findall(matchers)) - ADDED_BY_PROMETHEUS
            assert labels <= exported[name], f"{name} has no label {labels - exported[name]}: {expr}"
            asked += 1
        for group, name in GROUPED.findall(expr):  # sum by (le) (rate(NAME{...}[...])): NAME has le
            wanted = {g.strip() for g in group.split(",")} - ADDED_BY_PROMETHEUS
            assert wanted <= exported[name], f"{name} grouped by a label it does not have: {expr}"
            asked += 1
    assert asked >= 15
