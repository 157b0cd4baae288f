"""`kvset analyze SHARDS... --workers N | --dask ADDRESS`: the flags of a distributed analysis, and the
one call `kvset analyze` makes instead of its one-process analysis (kvset.distributed, which needs the
optional extra `dask`: imported only when asked for)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from kvset.cli.argtypes import positive_int

if TYPE_CHECKING:
    from kvset.offline import AnalysisResult

DASHBOARD = "127.0.0.1:8787"


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "more_traces",
        nargs="*",
        metavar="TRACE",
        help="with --workers or --dask: more trace files (or folders), in time order",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="analyse in partitions on a local Dask cluster of N single-threaded processes (127.0.0.1), "
        "merged exactly (needs the extra 'dask')",
    )
    where.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="analyse in partitions on the Dask cluster whose scheduler is at ADDRESS "
        "(tcp://host:8786); its workers read the files at the same paths",
    )
    p.add_argument(
        "--partitions",
        type=positive_int,
        metavar="P",
        help="with --workers or --dask and one file: cut it into P byte ranges (default: one a worker)",
    )
    p.add_argument(
        "--time-order",
        action="store_true",
        help="with several files: merge them in the order of their first timestamps, not as given",
    )
    p.add_argument(
        "--dashboard",
        nargs="?",
        const=DASHBOARD,
        metavar="HOST:PORT",
        help=f"with --workers: serve Dask's dashboard (default {DASHBOARD}); nothing listens without it",
    )


def distributed_requested(args: argparse.Namespace) -> bool:
    """Whether the flags ask for a distributed analysis; refuses the ones that go only with it."""
    if args.workers or args.dask:
        return True
    for flag, given in (
        ("more than one trace", args.more_traces),
        ("--partitions", args.partitions),
        ("--time-order", args.time_order),
        ("--dashboard", args.dashboard),
    ):
        if given:
            raise ValueError(f"{flag} needs --workers or --dask")
    return False


def analyze_from_args(args: argparse.Namespace) -> AnalysisResult:
    """The distributed analysis the flags ask for, as the one-process AnalysisResult."""
    if args.demo or args.log or not args.trace:
        raise ValueError("--workers and --dask analyse trace files: give them (not --demo or --log)")
    if args.opt:
        raise ValueError("--opt needs the whole trace in one process: not with --workers or --dask")
    if args.sample_size is not None:
        raise ValueError(
            "--sample-size lowers its rate as the whole stream grows, which does not distribute: give --sample R"
        )
    if args.dashboard and args.dask:
        raise ValueError("--dashboard is for --workers: a cluster's scheduler serves its own")
    try:
        if args.workers and not args.dask:  # importing and starting distributed here takes a second
            from kvset.distributed.server import start_worker_server

            start_worker_server()
        from kvset.distributed.driver import Cluster, analyze_distributed
        from kvset.distributed.partitions import PartitionError
        from kvset.distributed.worker import ReadConfig
    except ImportError as e:
        raise ValueError(
            f"--workers and --dask need Dask ({e.name} is missing): pip install 'kvset-top[dask]'"
        ) from None
    config = ReadConfig(
        horizon=args.horizon,
        order=args.order,
        format=args.format,
        block_size=args.block_size,
        strict=args.strict,
        hash_algo=args.hash_algo,
        python_hash_seed=args.python_hash_seed,
        sample_rate=args.sample,
        seed=args.seed,
    )
    cluster = Cluster(workers=args.workers, address=args.dask, dashboard=args.dashboard)
    try:
        return analyze_distributed(
            [args.trace, *args.more_traces], config, cluster, args.partitions, args.time_order
        )
    except PartitionError as e:
        raise ValueError(str(e)) from None
    except OSError as e:  # the scheduler cannot be reached, a port is taken
        raise ValueError(f"Dask: {e}") from None
