"""Command-line options for a KV-events source, shared by `kvset record` and `kvset-top --events`."""

from __future__ import annotations

import argparse

from kvset.sources.kv_events import DEFAULT_MEDIUM, KvEventsSource


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
        help="keep only this KV cache group's events (hybrid models: pick the full-attention group)",
    )
    group.add_argument(
        "--block-tokens",
        type=int,
        default=16,
        metavar="N",
        help="tokens per block for events that carry neither block_size nor token_ids (default 16)",
    )
    group.add_argument(
        "--replay-timeout",
        type=float,
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
        block_tokens=args.block_tokens,
        replay_timeout=args.replay_timeout,
    )
