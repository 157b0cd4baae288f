"""What the parsed flags describe: the model geometry (with its overrides) and the engine sources.

The flags themselves are defined in kvset.cli.flags; this module only reads them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from kvset.cli.flags import OVERRIDE_FLAGS
from kvset.geometry.model import ModelGeometry
from kvset.geometry.resolve import load_model

# Each source (its client, zmq or httpx, and its compiled tracker) is loaded when the flags name it:
# `kvset model` and the parsers need none of them.
if TYPE_CHECKING:
    from kvset.sources.kv_events import KvEventsSource
    from kvset.sources.log import LogSource
    from kvset.sources.metrics import MetricsSource


# -- the model -------------------------------------------------------------------------------------
def overrides_from_args(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {}
    for flag, field, _text in OVERRIDE_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:
            out[field] = value
    if getattr(args, "state_dtype", None) is not None:
        out["state_dtype"] = args.state_dtype
    if getattr(args, "model_dtype", None) is not None:
        out["model_dtype"] = args.model_dtype
    return out


def geometry_from_args(spec: str, args: argparse.Namespace) -> ModelGeometry:
    """Load `spec` (preset or config.json) and apply the override flags. Raises GeometryError."""
    return load_model(spec).with_overrides(**overrides_from_args(args))


# -- the engine sources ----------------------------------------------------------------------------
def log_source_from_args(args: argparse.Namespace, follow: bool) -> LogSource | None:
    if not getattr(args, "log", None):
        return None
    from kvset.sources.log import LogSource

    return LogSource(
        args.log,
        follow=follow,
        engine=args.log_engine,
        block_size=args.block_size,
        hash_algo=args.hash_algo,
        python_hash_seed=args.python_hash_seed,
        max_log_len=args.log_max_log_len,
        truncated=args.log_truncated,
        from_end=getattr(args, "log_from_end", False),  # a whole read (analyze) starts at the top
    )


def metrics_source_from_args(args: argparse.Namespace) -> MetricsSource | None:
    """Raises ValueError for a URL that cannot be polled."""
    if not getattr(args, "metrics", None):
        return None
    from kvset.sources.metrics import MetricsSource

    return MetricsSource(
        args.metrics,
        interval=args.metrics_interval,
        timeout=args.metrics_timeout,
        window_s=args.metrics_window,
        max_body_bytes=args.metrics_max_bytes,
    )


def events_source_from_args(args: argparse.Namespace) -> KvEventsSource:
    """Raises ValueError for unusable endpoint specs."""
    from kvset.sources.kv_events import KvEventsSource

    return KvEventsSource(
        endpoints=args.events,
        replay_endpoints=args.replay_endpoint,
        topic=args.topic,
        medium=args.medium,
        radix_policy=args.radix_eviction_policy,
        group_idx=args.group_idx,
        block_size=args.block_size,
        replay_timeout=args.replay_timeout,
    )
