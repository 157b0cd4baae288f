"""Command-line options of the engine sources (KV events, log, /metrics), shared by kvset-top, analyze, record.

Options other than --log and --metrics carry a prefix so they cannot collide with a command's own
(--block-size of a token-id trace, --interval of the UI).
"""

from __future__ import annotations

import argparse

from kvset.argtypes import positive_float, positive_int
from kvset.formats.vllm_hash import HASH_ALGOS
from kvset.sources.kv_events import DEFAULT_MEDIUM, KvEventsSource
from kvset.sources.log import ENGINES, TRUNCATED_POLICIES, LogSource
from kvset.sources.metrics import MetricsSource


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("engine log (--log)")
    g.add_argument("--log", metavar="PATH", help="a vLLM or SGLang log file (plain or .gz when read whole)")
    g.add_argument("--log-engine", choices=ENGINES, default="auto", help="which engine wrote the log")
    g.add_argument(
        "--log-block-size", type=positive_int, default=16, metavar="N", help="the engine's block size (vLLM: 16)"
    )
    g.add_argument("--log-hash-algo", choices=HASH_ALGOS, default="sha256", help="vLLM --prefix-caching-hash-algo")
    g.add_argument(
        "--log-hash-seed", metavar="SEED", help="PYTHONHASHSEED the engine ran with (changes vLLM's root hash)"
    )
    g.add_argument(
        "--log-max-log-len", type=positive_int, metavar="N", help="vLLM's --max-log-len, if set (else inferred)"
    )
    g.add_argument(
        "--log-truncated",
        choices=TRUNCATED_POLICIES,
        default="skip",
        help="prompts with cut id lists: skip them (default) or use their first blocks",
    )
    g.add_argument("--log-from-end", action="store_true", help="follow only what is written from now on")


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("engine metrics (--metrics)")
    g.add_argument("--metrics", metavar="URL", help="the engine's Prometheus endpoint, e.g. http://127.0.0.1:8000/metrics")
    g.add_argument("--metrics-interval", type=positive_float, default=1.0, metavar="S", help="poll every S seconds")
    g.add_argument("--metrics-timeout", type=positive_float, default=2.0, metavar="S", help="request timeout")
    g.add_argument(
        "--metrics-window", type=positive_float, default=60.0, metavar="S", help="hit-rate window in seconds"
    )


def log_source_from_args(args: argparse.Namespace, follow: bool) -> LogSource | None:
    if not getattr(args, "log", None):
        return None
    return LogSource(
        args.log,
        follow=follow,
        engine=args.log_engine,
        block_size=args.log_block_size,
        hash_algo=args.log_hash_algo,
        python_hash_seed=args.log_hash_seed,
        max_log_len=args.log_max_log_len,
        truncated=args.log_truncated,
        from_end=args.log_from_end,
    )


def metrics_source_from_args(args: argparse.Namespace) -> MetricsSource | None:
    if not getattr(args, "metrics", None):
        return None
    return MetricsSource(
        args.metrics,
        interval=args.metrics_interval,
        timeout=args.metrics_timeout,
        window_s=args.metrics_window,
    )


def add_events_arguments(parser: argparse.ArgumentParser, required: bool = False) -> None:
    group = parser.add_argument_group("KV events over ZMQ (vLLM, SGLang)")
    group.add_argument(
        "--events",
        action="append",
        metavar="ENDPOINT",
        required=required,
        help="the engine's KV-event PUB endpoint, e.g. tcp://HOST:5557; repeat it or give a port range "
        "(tcp://HOST:5557-5560) for data-parallel ranks, which publish on port + rank",
    )
    group.add_argument(
        "--replay-endpoint",
        action="append",
        metavar="ENDPOINT",
        help="the engine's replay ROUTER endpoint (its replay_endpoint), used to recover sequence gaps; "
        "one per --events endpoint, or one that is offset by rank like the engine does",
    )
    group.add_argument(
        "--topic", default="", help="the engine's event topic (default: empty, vLLM's default)"
    )
    group.add_argument(
        "--medium",
        default=DEFAULT_MEDIUM,
        help="which cache tier's events count: GPU (default), CPU, STORAGE, CPU_PINNED, DISK, EXTERNAL, or all",
    )
    group.add_argument(
        "--group-idx",
        type=int,
        default=None,
        metavar="N",
        help="count only this KV cache group's events (default: the group the events call full attention, "
        "else the first group seen)",
    )
    group.add_argument(
        "--events-block-size",
        type=positive_int,
        default=16,
        metavar="N",
        help="tokens per block for events that carry neither block_size nor token_ids (default 16)",
    )
    group.add_argument(
        "--replay-timeout",
        type=positive_float,
        default=1.0,
        metavar="S",
        help="how long to wait for a replay before counting the missing batches as lost (default 1 s)",
    )


def events_source_from_args(args: argparse.Namespace) -> KvEventsSource:
    """Raises ValueError for unusable endpoint specs."""
    return KvEventsSource(
        endpoints=args.events,
        replay_endpoints=args.replay_endpoint,
        topic=args.topic,
        medium=args.medium,
        group_idx=args.group_idx,
        block_tokens=args.events_block_size,
        replay_timeout=args.replay_timeout,
    )
