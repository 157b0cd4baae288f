"""The process the local cluster's workers are forked from: started first, importing kvset and loading
its kernels (kvset.distributed.preload) while the client imports Dask and starts the scheduler.

Spawned, every worker imported distributed, numpy, numba and kvset itself (0.7 CPU s each) and loaded
the kernels in its first task (about 0.8 s). Forked from this server, a worker starts with all of it in
memory. Not forked from the client itself: forked so, a run of `make bench-dask` hung once (not
diagnosed; the client's sockets and event-loop thread, which a fork inherits, the suspects), while the
server is a fresh interpreter that holds none of them. No Dask import at the top: the CLI starts the
server before it imports distributed.
"""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing import forkserver

PRELOAD = ("kvset.distributed.preload",)
AVAILABLE = "forkserver" in multiprocessing.get_all_start_methods()  # not on Windows: spawned there
_PRE_SPAWN = "distributed.nanny.pre-spawn-environ"
SERVER_ENV = "KVSET_WORKER_SERVER"  # set in the server's environment only: kvset.distributed.preload reads it


def worker_environ() -> dict[str, object]:
    """Dask's environment for its worker processes without MALLOC_TRIM_THRESHOLD_: set, it also fixes
    glibc's mmap threshold at 128 kB, so every array of a batch above it is mapped afresh and its
    pages faulted in (the partitions' analysis took 25 % more CPU seconds, `make bench-dask`)."""
    import dask

    environ = {k: v for k, v in dask.config.get(_PRE_SPAWN, {}).items() if k != "MALLOC_TRIM_THRESHOLD_"}
    return {_PRE_SPAWN: environ}


def start_method() -> dict[str, object]:
    """Dask's setting that forks the local workers from the server."""
    return {"distributed.worker.multiprocessing-method": "forkserver"} if AVAILABLE else {}


def start_worker_server() -> None:
    """The server started with the workers' environment, which its forks inherit (one BLAS and OpenMP
    thread each, Dask's pre-spawn environment): this returns at once, the server imports and loads in
    the background. This process's own environment is left as it was. Dask's own preload list, which
    it sets later, does not reach a server already running. A server running already is kept."""
    if not AVAILABLE:
        return
    environ = worker_environ()[_PRE_SPAWN]
    assert isinstance(environ, dict)
    before = dict(os.environ)
    os.environ.update({k: str(v) for k, v in environ.items()})
    os.environ[SERVER_ENV] = "1"  # read by kvset.distributed.preload in the server only
    forkserver.set_forkserver_preload(list(PRELOAD))
    try:
        forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(before)


def stop_worker_server() -> None:
    """The server ended with its cluster, and reaped (its CPU seconds and its workers', which it
    reaped, are then this process's children's, as spawned workers' are); the next local cluster
    starts its own. A private method of the standard library's: without it the server would linger
    until this process ends."""
    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if AVAILABLE and stop is not None:
        stop()
