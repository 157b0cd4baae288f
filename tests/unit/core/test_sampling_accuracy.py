"""A sampled curve stays close to the exact one on a real trace and on the agentic workload.

At rate 0.1 (the benchmark measures rate 0.01 on larger traces: benchmarks/sampling.py). The error is
the mean absolute difference of the block hit rate at 20 log-spaced capacities, averaged over seeds,
as the benchmark reports it.
"""

import numpy as np
import pytest

from kvset.core.analyzer import Analyzer
from kvset.core.sampling import SampledAnalyzer
from kvset.formats import read_trace
from kvset.units import StreamUnits
from kvset.workload import WorkloadConfig, generate
from tests.support.paths import MOONCAKE_TRACE

SEEDS = (0, 1, 2)


def _errors(batches, rate):
    units = StreamUnits(batches[0].block_size, "format")  # the trace's, or the workload's
    exact = Analyzer(units=units)
    for b in batches:
        exact.feed_batch(b)
    truth = exact.curve()
    caps = truth.log_capacities(20)
    mean, worst = [], []
    for seed in SEEDS:
        a = SampledAnalyzer(sample_rate=rate, seed=seed, units=units)
        for b in batches:
            a.feed_batch(b)
        c = a.curve()
        diff = np.abs(c.hit_rates(caps) - truth.hit_rates(caps))
        mean.append(diff.mean())
        worst.append(diff.max())
        # the working set a sample gives lies near the exact one
        assert abs(c.working_set(0.95) - truth.working_set(0.95)) <= 0.1 * truth.working_set(0.95)
    return float(np.mean(mean)), float(np.max(worst))


@pytest.mark.parametrize("rate", [0.1])
def test_error_on_the_mooncake_trace(rate):
    trace = read_trace(MOONCAKE_TRACE)
    mean, worst = _errors(list(trace.batches()), rate)
    assert mean < 0.005 and worst < 0.03  # measured 0.10 and 0.54 points (3 seeds)


@pytest.mark.parametrize("rate", [0.1])
def test_error_on_the_agentic_workload(rate):
    batch = generate(1_000_000, WorkloadConfig(seed=7))
    mean, worst = _errors([batch], rate)
    assert mean < 0.005 and worst < 0.03  # measured 0.18 and 1.4 points (3 seeds)
