"""The copy of the stream an analyzer saw: the same accesses, in the order the analyzer took them."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kvset.core.analyzed_stream import AnalyzedStream
from kvset.core.analyzer import Analyzer
from kvset.core.naive import naive_stack_distances, reverse_within_requests
from kvset.types import AccessBatch
from kvset.units import StreamUnits


@st.composite
def batches(draw):
    out = []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 12))
        keys = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=np.uint64)
        starts = sorted(draw(st.sets(st.integers(0, max(0, n - 1)), max_size=4))) if n else []
        tokens = (
            None
            if draw(st.booleans())
            else np.array(draw(st.lists(st.integers(1, 16), min_size=n, max_size=n)))
        )
        out.append(
            AccessBatch(
                keys,
                tokens=tokens,
                request_starts=np.array(starts, dtype=np.int64) if draw(st.booleans()) else None,
                timestamps=1.0,
                block_size=draw(st.sampled_from([None, 16])),
            )
        )
    return out


@given(batches(), st.sampled_from(["forward", "reverse"]))
def test_the_copy_is_the_stream_the_analyzer_analyzed(bs, order):
    units = StreamUnits(16, "flag")
    stream, analyzer = AnalyzedStream(order, block_size=16), Analyzer(order=order, units=units)
    expected_keys, expected_tokens, distances = [], [], []
    for b in bs:
        stream.add(b)
        d = analyzer.feed_batch(b, return_distances=True)
        keys = b.keys.tolist()
        tokens = b.tokens.tolist() if b.tokens is not None else [16] * len(keys)
        if order == "reverse" and b.request_starts is not None and len(b.request_starts):
            keys = reverse_within_requests(keys, b.request_starts.tolist())
            tokens = reverse_within_requests(tokens, b.request_starts.tolist())
            d = np.array(reverse_within_requests(d.tolist(), b.request_starts.tolist()))
        expected_keys += keys
        expected_tokens += tokens
        distances += d.tolist()
    keys, tokens = stream.arrays()
    assert keys.tolist() == expected_keys and tokens.tolist() == expected_tokens and len(stream) == len(keys)
    # the analyzer's distances (given back in the batch's order) are those of the copy's order
    assert distances == naive_stack_distances(expected_keys)
    assert stream.arrays()[0] is keys  # joined once


def test_nothing_added_gives_empty_arrays():
    keys, tokens = AnalyzedStream().arrays()
    assert len(keys) == len(tokens) == 0 and keys.dtype == np.uint64
