"""Offline analysis of a whole access stream: what `kvset analyze` and `kvset verify` compute."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from kvset.core.analyzer import DEFAULT_HORIZON, Analyzer
from kvset.core.curve import HitRateCurve
from kvset.rejects import RejectCounter
from kvset.types import AccessBatch

DEFAULT_TARGETS = (0.95, 0.99, 0.999)


@dataclass
class InputSummary:
    """What was read, whatever the source (trace file, log, demo)."""

    name: str
    format: str
    block_tokens: int | None
    requests: int = 0
    lines: int = 0
    rejects: RejectCounter = field(default_factory=RejectCounter)
    warnings: RejectCounter = field(default_factory=RejectCounter)
    notes: list[str] = field(default_factory=list)
    read_seconds: float = 0.0


@dataclass
class AnalysisResult:
    input: InputSummary
    analyzer: Analyzer
    curve: HitRateCurve
    analyze_seconds: float

    @property
    def accesses(self) -> int:
        return self.analyzer.accesses

    @property
    def distinct_blocks(self) -> int:
        # first-time accesses are distinct blocks; beyond-horizon ones were seen before
        return self.analyzer.first_time

    @property
    def horizon_reached(self) -> bool:
        return self.analyzer.forgotten_blocks > 0


def analyze_batches(
    batches: Iterable[AccessBatch],
    summary: InputSummary,
    horizon: int = DEFAULT_HORIZON,
    order: str = "forward",
    *,
    sample_rate: float | None = None,
    sample_size: int | None = None,
    seed: int = 0,
) -> AnalysisResult:
    """The whole stream through one analyzer; with sample_rate or sample_size a sampled one (estimates)."""
    analyzer = Analyzer(horizon=horizon, order=order, block_tokens=summary.block_tokens,
                        sample_rate=sample_rate, sample_size=sample_size, seed=seed)  # fmt: skip
    t0 = time.perf_counter()
    requests = 0
    for batch in batches:
        analyzer.feed_batch(batch)
        requests += len(batch.request_starts) if batch.request_starts is not None else 0
    if not summary.requests:
        summary.requests = requests
    curve = analyzer.curve()
    return AnalysisResult(summary, analyzer, curve, time.perf_counter() - t0)


def verify_capacities(curve: HitRateCurve, targets: Iterable[float] = DEFAULT_TARGETS, n: int = 20) -> list[int]:
    """20 log-spaced capacities plus the working-set capacities of the targets (both modes)."""
    caps = set(int(c) for c in curve.log_capacities(n))
    for t in targets:
        for mode in ("coverage", "absolute"):
            ws = curve.working_set(t, mode=mode)
            if ws:
                caps.add(ws)
                if ws > 1:
                    caps.add(ws - 1)  # the capacity just short of the target must miss it
    return sorted(c for c in caps if 1 <= c <= curve.horizon)


def keys_in_analyzed_order(batches: Iterable[AccessBatch], order: str) -> tuple[np.ndarray, np.ndarray]:
    """The access stream exactly as the analyzer sees it (reverse order applied), for the naive replay."""
    from kvset.core.naive import reverse_within_requests

    keys, tokens = [], []
    for b in batches:
        k = np.asarray(b.keys, dtype=np.uint64)
        t = (
            np.asarray(b.tokens, dtype=np.int64)
            if b.tokens is not None
            else np.full(len(k), b.block_tokens or 1, dtype=np.int64)
        )
        if order == "reverse" and b.request_starts is not None and len(b.request_starts):
            perm = np.array(reverse_within_requests(range(len(k)), list(b.request_starts)), dtype=np.int64)
            k, t = k[perm], t[perm]
        keys.append(k)
        tokens.append(t)
    if not keys:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return np.concatenate(keys), np.concatenate(tokens)
