"""Text from input never reaches a view raw: escape sequences and control bytes put into every input
path (KV-event strings, log lines, /metrics labels and bodies, trace lines and file names) come out
escaped in the source health, the snapshot JSON and the `--once` text, and still say what arrived."""

from __future__ import annotations

import json
import threading
import unicodedata

import msgspec
import pytest

from kvset.core.stack_distance import new_analyzer
from kvset.monitor import Monitor
from kvset.report import snapshot_json, snapshot_text
from kvset.snapshot.builder import SnapshotBuilder, SnapshotConfig
from kvset.sources.kv_events import KvEventsSource
from kvset.sources.log import LogSource
from kvset.sources.metrics import MetricsSource
from kvset.sources.replay import ReplaySource
from kvset.types import SourceHealth, TimelineEvent
from tests.support.engine_metrics_server import FakeEngine, vllm_exposition
from tests.support.kv_values import stored
from tests.support.vllm_publisher import FakeVllmPublisher

# ESC + CSI colour, OSC window title ended by BEL, NUL, CR, LF, a C1 CSI byte, a bidi override, DEL
NASTY = "\x1b[31mRED\x1b]0;pwned\x07\x00\r\n\x9b2J\u202eevil\x7f"
UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs")


def unsafe(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES or c in "\u2028\u2029"]


def strings(value) -> list[str]:
    """Every string in a JSON-ready value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return []


def health_strings(h: SourceHealth) -> list[str]:
    out = [h.source, h.kind, h.state, *h.notes, *(x for kv in h.details for x in kv)]
    return out + [s for r in h.rejected for s in (r.reason, *r.examples)]


def nasty_events(pub: FakeVllmPublisher) -> None:
    with_lora = {**stored([11, 12]), "lora_name": NASTY, "kv_cache_spec_kind": NASTY}
    other_medium = stored([13], medium=NASTY)
    unknown = {"type": NASTY, "block_hashes": [1]}
    pub.publish_payload(msgspec.msgpack.encode([1.0, [with_lora, other_medium, unknown], 0]))
    pub.publish_payload(NASTY.encode() + b"\xc1")  # not msgpack at all


def nasty_log(tmp_path):
    log = tmp_path / "vllm.log"
    good = (
        "(APIServer pid=1) DEBUG 03-14 09:00:01 [logger.py:48] Request chatcmpl-1 details: prompt: "
        f"'{NASTY}', prompt_token_ids: {list(range(40))}, prompt_embeds shape: None.\n"
    )
    bad = (
        "(APIServer pid=1) DEBUG 03-14 09:00:02 [logger.py:48] Request chatcmpl-2 details: prompt: None, "
        f"prompt_token_ids: [1, 2, {NASTY}], prompt_embeds shape: None.\n"
    )
    log.write_text(good + bad + NASTY + "\n")
    return log


def nasty_trace(tmp_path):
    trace = tmp_path / f"trace{NASTY.replace(chr(0), '')}.jsonl"  # a file name can hold all but NUL and /
    lines = [
        json.dumps({"timestamp": 0, "input_length": 1024, "output_length": 0, "hash_ids": [1, 2]}),
        '{"timestamp": 1, "input_length": "'
        + NASTY.replace("\n", "").replace("\r", "")
        + '", "hash_ids": [1]}',
        NASTY.replace("\n", " ").replace("\r", " "),
        json.dumps({"timestamp": 2, "input_length": 1024, "output_length": 0, "hash_ids": [1, 3]}),
    ]
    trace.write_text("\n".join(lines) + "\n")
    return trace


def nasty_metrics_engines() -> tuple[FakeEngine, FakeEngine]:
    labels = FakeEngine()
    second = vllm_exposition(500, 50).replace('model_name="', f'model_name="{NASTY.replace(chr(10), "")}')
    first = vllm_exposition(1000, 100)
    # two model series: their names are listed in a note; a cache_config_info label that is no number
    lines = [line for line in second.splitlines() if line.startswith("vllm:prefix_cache_")]
    labels.body = (
        (first + "\n".join(lines) + "\n").replace('block_size="16"', f'block_size="{NASTY[:6]}"').encode()
    )
    broken = FakeEngine()
    broken.body = f"vllm:kv_cache_usage_perc{{x=1}} {NASTY}\n".encode()  # unparsable: the parser quotes it
    return labels, broken


@pytest.fixture
def snapshot(tmp_path):
    labels, broken = nasty_metrics_engines()
    with FakeVllmPublisher() as pub:
        events = KvEventsSource([pub.endpoint], medium="GPU", idle_tick=0.05)
        sources = [
            events,
            LogSource(nasty_log(tmp_path), follow=False),
            ReplaySource(str(nasty_trace(tmp_path)), speed=None),
            MetricsSource(labels.url, interval=0.1, timeout=1.0),
            MetricsSource(broken.url, interval=0.1, timeout=1.0),
        ]
        monitor = Monitor(sources, new_analyzer, SnapshotBuilder(SnapshotConfig()), interval=0.1)

        def publish_when_subscribed():
            pub.wait_for_subscriber(timeout=10)
            nasty_events(pub)

        t = threading.Thread(target=publish_when_subscribed, daemon=True)
        t.start()
        snap = monitor.collect(3.0)
        t.join(5)
    labels.stop()
    broken.stop()
    return snap


def test_no_view_receives_a_raw_control_character(snapshot):
    for h in snapshot.sources:
        assert not [s for s in health_strings(h) if unsafe(s)], h.source
    for e in snapshot.events:
        assert not unsafe(e.kind + e.text)
    assert not [s for s in strings(snapshot_json(snapshot)) if unsafe(s)]
    for line in snapshot_text(snapshot).split("\n"):
        assert not unsafe(line), repr(line)


def test_what_arrived_is_still_readable_escaped(snapshot):
    text = snapshot_text(snapshot)
    everything = text + json.dumps(snapshot_json(snapshot), ensure_ascii=False)
    assert r"\x1b[31mRED" in everything  # the CSI sequence, visible
    assert r"\x1b]0;pwned\x07" in everything  # the OSC title sequence, visible
    assert r"\u202eevil" in everything  # the bidi override, visible
    kinds = {h.kind for h in snapshot.sources}
    assert kinds == {"events", "log", "replay", "metrics"}
    # each input path got its nasty text into a view, escaped
    by_kind = {h.kind: " ".join(health_strings(h)) for h in snapshot.sources}
    assert r"\x1b" in by_kind["events"]  # the medium, the spec kind, the unknown type
    assert r"\x1b" in by_kind["log"]  # the malformed token list
    assert r"\x1b" in by_kind["replay"]  # the file name and the rejected lines
    metrics = " ".join(" ".join(health_strings(h)) for h in snapshot.sources if h.kind == "metrics")
    assert r"\x1b" in metrics  # model_name labels, the unparsable body


def test_the_contract_types_escape_when_built():
    h = SourceHealth(
        source=NASTY, kind="log", connected=True, state=NASTY, notes=(NASTY,), details=((NASTY, NASTY),)
    )
    assert not [s for s in health_strings(h) if unsafe(s)]
    assert h.state == r"\x1b[31mRED\x1b]0;pwned\x07\x00\r\n\x9b2J\u202eevil\x7f"
    assert not unsafe(TimelineEvent(0.0, NASTY, NASTY).text)
