"""`kvset analyze SHARDS... --workers N | --dask ADDRESS`: the partitions analysed on Dask workers, each
reading its own bytes, their partial states merged by an ordered tree of merges (log2 p rounds), the
root read as the one-process AnalysisResult. One task a worker: a run of consecutive partitions,
analysed and merged where they are (kvset.distributed.tree), so that a state crosses the network once
a worker, not once a partition (64 partitions on 2 workers were 127 tasks and as many states pickled).

A LocalCluster of N single-threaded worker processes by default (forked from the server of
kvset.distributed.server, kvset and its kernels loaded), its scheduler and workers bound to
127.0.0.1 (they talk over the loopback), Dask's dashboard only when asked (--dashboard); or the
scheduler of a cluster at --dask, whose workers must see the same paths. Dask moves the states
between our own processes by pickling them; the input itself is only parsed, never executed or
unpickled. Progress (partitions analysed, merges done by round) goes to stderr, and to the dashboard.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

import dask
from distributed import Client, KilledWorker, LocalCluster, as_completed, get_worker

from kvset.distributed.partitions import Partition, PartitionError, group_runs, plan_partitions
from kvset.distributed.result import distributed_result
from kvset.distributed.server import start_method, start_worker_server, stop_worker_server, worker_environ
from kvset.distributed.tree import analyze_run, merge_states, parts_of, run_depth
from kvset.distributed.worker import ReadConfig
from kvset.offline import AnalysisResult


@dataclass(frozen=True)
class Cluster:
    """Where the work runs: `workers` local processes, or the scheduler at `address`."""

    workers: int | None = None
    address: str | None = None
    dashboard: str | None = None  # host:port of the local cluster's dashboard; None: no dashboard

    def describe(self, client: Client) -> str:
        n = len(client.nthreads())
        if self.address:
            return f"{n} Dask workers of the scheduler at {self.address}"
        return f"a local Dask cluster of {n} single-threaded worker processes"


def _open(cluster: Cluster) -> tuple[Client, LocalCluster | None]:
    if cluster.address:
        return Client(cluster.address, timeout="20s"), None
    local = start_local_cluster(cluster.workers or 1, cluster.dashboard)
    return Client(local), local


def start_local_cluster(workers: int, dashboard: str | None = None) -> LocalCluster:
    """A LocalCluster of `workers` single-threaded processes forked from the worker server, on
    127.0.0.1; Dask's dashboard at `dashboard` (host:port) only when asked. Ended by
    close_local_cluster. The benchmarks keep one running across analyses, as a cluster at --dask is."""
    asked = dashboard is not None
    if asked and importlib.util.find_spec("bokeh") is None:
        raise PartitionError("--dashboard needs bokeh (pip install 'kvset-top[dask]')")
    # Dask's processes always start an HTTP server beside their TCP comms: on 127.0.0.1, a free port,
    # and serving no route at all unless the dashboard was asked for
    quiet: dict[str, object] = (
        {} if asked else {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    )
    start_worker_server()  # its imports run while the scheduler starts (kvset.distributed.server)
    with dask.config.set({**quiet, **worker_environ(), **start_method()}):
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            dashboard_address=dashboard if asked else "127.0.0.1:0",
            scheduler_kwargs={"dashboard": asked},
            silence_logs=logging.ERROR,
            memory_limit=0,  # a worker's state is what it is: no pausing or spilling to disk
        )


def close_local_cluster(local: LocalCluster) -> None:
    """The cluster closed and its worker server ended (kvset.distributed.server)."""
    local.close()
    stop_worker_server()


def _run_task(parts: list[Partition], config: ReadConfig, root: bool) -> Any:
    """A run of consecutive partitions on a worker (kvset.distributed.tree), each of its steps sent to
    the client as a Dask event: the progress line counts partitions and merges as they are done."""
    return analyze_run(parts, config, root, on_step=_tell)


def _tell(kind: str, level: int) -> None:
    get_worker().log_event(PROGRESS, (kind, level))


PROGRESS = "kvset-progress"  # the Dask event topic of the runs' steps


class _Progress:
    """Partitions analysed and merges done, on one line of stderr (rewritten on a terminal). Told from
    two threads: Dask's, with the runs' events, and the driver's, with the merges across runs."""

    def __init__(self, partitions: int, rounds: int, out: TextIO | None) -> None:
        self.partitions, self.merges, self.rounds = partitions, partitions - 1, rounds
        self.done_parts = self.done_merges = self.round = 0
        self.out = out
        self._last = 0.0
        self._lock = threading.Lock()
        self._ended = False
        self._shown = ""

    def step(self, kind: str, level: int) -> None:
        with self._lock:
            if self._ended:
                return
            if kind == "merge":
                self.done_merges += 1
                self.round = max(self.round, level)
            else:
                self.done_parts += 1
            now = time.monotonic()
            if now - self._last >= 0.5:
                self._last = now
                self._show(end=False)

    def end(self, rounds: int) -> None:
        """All done (a run's last events may come after its result): the line says so once, with the
        root's round (the tree's depth)."""
        with self._lock:
            if not self._ended:
                self._ended = True
                self.done_parts, self.done_merges = self.partitions, self.merges
                self.round = self.rounds = rounds
                self._show(end=True)

    def _show(self, end: bool) -> None:
        if self.out is None:
            return
        line = (
            f"kvset analyze: {self.done_parts}/{self.partitions} partitions analysed, "
            f"{self.done_merges}/{self.merges} merges (round {self.round}/{self.rounds})"
        )
        if line == self._shown and not (end and self.out.isatty()):
            return  # told twice (a run's last step, then the end)
        self._shown = line
        tty = self.out.isatty()
        self.out.write(("\r" + line + ("\n" if end else "")) if tty else line + "\n")
        self.out.flush()


def _submit_tree(client: Client, leaves: list[Any]) -> tuple[list[Any], dict[str, tuple[int, list[str]]]]:
    """The ordered tree of merges over the leaves' futures, pairs of neighbours round after round (the
    last one the root): the merges' futures, and per merge's key its round and its inputs' keys
    (released once it is done)."""
    merges: list[Any] = []
    inputs: dict[str, tuple[int, list[str]]] = {}
    level, round_no = list(leaves), 0
    while len(level) > 1:
        round_no += 1
        nxt = []
        for i in range(0, len(level), 2):
            if i + 1 < len(level):
                a, b = level[i], level[i + 1]
                root = len(level) == 2
                f = client.submit(merge_states, a, b, root, key=f"kvset-merge-r{round_no}-{i // 2}")
                inputs[str(f.key)] = (round_no, [str(a.key), str(b.key)])
                merges.append(f)
                nxt.append(f)
            else:
                nxt.append(level[i])
        level = nxt
    return merges, inputs


def _time_ordered(client: Client, futures: list[Any]) -> list[Any]:
    """The partitions' futures in the order of their first timestamps (stable: ties keep the order given)."""
    starts = client.gather([client.submit(lambda s: s.t_first, f, pure=False) for f in futures])
    order = sorted(range(len(futures)), key=lambda i: (starts[i] != starts[i], starts[i], i))
    return [futures[i] for i in order]


def analyze_distributed(
    inputs: list[str],
    config: ReadConfig,
    cluster: Cluster,
    partitions: int | None = None,
    time_order: bool = False,
    progress: bool = True,
) -> AnalysisResult:
    """The analysis of `inputs` (files in stream order, a folder, or one file cut into byte ranges:
    `partitions` of them, default the workers' count) on Dask, as kvset analyze's one-process result."""
    if config.sample_rate is not None:
        raise PartitionError(
            "--sample with --workers or --dask: a sampled run's time windows do not merge yet "
            "(docs/method.md, section 13): run it in one process"
        )
    t0 = time.perf_counter()
    client, local = _open(cluster)
    try:
        phases = {"cluster": time.perf_counter() - t0}
        n_workers = len(client.nthreads()) or 1
        parts, cut = plan_partitions(inputs, partitions or n_workers)
        ordered = time_order and len(parts) > 1 and all(p.end is None for p in parts)
        # one run a worker, of consecutive partitions; files to order by their timestamps go one a run
        runs = [[p] for p in parts] if ordered else group_runs(parts, n_workers)
        local_rounds = max(run_depth(len(r)) for r in runs)
        bar = _Progress(len(parts), local_rounds + run_depth(len(runs)), sys.stderr if progress else None)
        client.subscribe_topic(PROGRESS, lambda event: bar.step(*event[1]))
        futures = [  # one run is the root itself
            client.submit(_run_task, run, config, len(runs) == 1, key=f"kvset-run-{k}", pure=False)
            for k, run in enumerate(runs)
        ]
        if ordered:
            futures = _time_ordered(client, futures)
            cut += ", ordered by their first timestamps"
        merges, inputs_of = _submit_tree(client, futures)
        held = {str(f.key): f for f in [*futures, *merges]}
        root_key = str(merges[-1].key if merges else futures[0].key)
        left = len(futures)
        del futures, merges
        for f in as_completed(list(held.values())):
            if f.status == "error":
                try:
                    f.result()  # raises the worker's exception here
                except KilledWorker as e:  # a worker process died under a task (out of memory, killed)
                    raise PartitionError(f"a Dask worker died while it ran {e.task}") from None
            merged = inputs_of.get(str(f.key))
            if merged is not None:
                bar.step("merge", local_rounds + merged[0])
            for k in merged[1] if merged else ():
                held.pop(k, None)  # a merged state's inputs leave the workers' memory
            left -= merged is None
            if not left and "runs" not in phases:
                phases["runs"] = time.perf_counter() - t0  # analysed, and merged on their workers
        state = held[root_key].result()
        bar.end(state.extra.get("round", 0))
        phases["merged"] = time.perf_counter() - t0
        how = (
            f"computed on {cluster.describe(client)}: {cut}, analysed where their bytes are and merged "
            f"in {state.extra.get('round', 0)} rounds of an ordered merge of partial stacks "
            "(docs/method.md, section 13)"
        )
    finally:
        client.close()
        if local is not None:
            close_local_cluster(local)
    all_parts = parts_of(state)
    if not any(p["requests"] for p in all_parts):
        raise PartitionError(
            f"no valid request in {', '.join(inputs)} ({sum(p['lines'] for p in all_parts)} lines read)"
        )
    name = inputs[0] if len(inputs) == 1 else f"{inputs[0]} and {len(inputs) - 1} more"
    result = distributed_result(name, state, all_parts, config.order, how, time.perf_counter() - t0)
    phases["read as the result"] = time.perf_counter() - t0
    result.analyzer.computed.update(  # type: ignore[attr-defined]
        partitions=all_parts, merges=state.extra.get("merges", []), workers=n_workers, phases=phases
    )
    return result
