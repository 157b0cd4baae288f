"""A trace in the shape of WEKA's Claude Code traces: 64 tokens a block, full blocks only.

WEKA publishes agentic coding sessions with `block_size` 64 and hash ids local to a conversation:
every request re-sends its conversation so far (the system prompt and tools first, then the turns),
and only its full 64-token blocks have a hash id, so len(hash_ids) == input_length // 64. Here the
same shape is made up, flattened to Mooncake-style lines (timestamp in ms, input_length, hash_ids),
which is how a converted trace reaches kvset.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

WEKA_BLOCK_SIZE = 64


def weka_style_lines(sessions: int = 12, turns: int = 20, seed: int = 0) -> list[dict]:
    """Requests of `sessions` agent conversations, interleaved in time: each turn's prompt is the
    conversation so far (a shared system prefix, then its own history) plus a new tool result."""
    rng = np.random.default_rng(seed)
    system_tokens = 12_000 + int(rng.integers(0, 64))  # tools and system prompt, shared by every session
    lines = []
    next_id = 1_000_000
    for s in range(sessions):
        context = system_tokens
        t = float(rng.uniform(0, 60))
        for _ in range(turns):
            context += int(rng.integers(200, 4000))  # the last reply and a tool result
            full = context // WEKA_BLOCK_SIZE  # full blocks only: the tail has no hash
            shared = system_tokens // WEKA_BLOCK_SIZE
            # the system prefix has the same ids in every session, the rest is this session's own
            ids = list(range(shared)) + [next_id + s * 100_000 + i for i in range(full - shared)]
            lines.append(
                {"timestamp": round(t * 1000), "input_length": context, "output_length": 200, "hash_ids": ids}
            )
            t += float(rng.exponential(8.0))
    lines.sort(key=lambda line: line["timestamp"])
    return lines


def write_weka_style_trace(path: Path, **kwargs) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in weka_style_lines(**kwargs)))
    return path
