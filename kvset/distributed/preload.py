"""Imported once by the local cluster's fork server (kvset.distributed.driver), before it forks the
worker processes: every module a worker's task needs, and the compiled kernels loaded by analysing a
few lines of Mooncake JSONL in two partitions, merged at the root. Each worker then starts with all of
it in memory instead of importing distributed, numpy, numba and kvset itself and loading the kernels
from numba's cache in its first task (0.7 CPU s and about 0.8 s a worker, `make bench-dask`).

Only in the server (kvset.distributed.server marks its environment) does importing this module warm
the kernels and end the process by os._exit: imported anywhere else (the layering test imports every
module), it loads its imports and does nothing more.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile

import distributed  # noqa: F401 - what the worker process runs, loaded before the fork

from kvset.core.feed_args import DEFAULT_HORIZON
from kvset.distributed.partitions import plan_partitions
from kvset.distributed.server import SERVER_ENV
from kvset.distributed.tree import analyze_run
from kvset.distributed.worker import ReadConfig

_LINES = b"".join(
    b'{"timestamp": %d, "input_length": %d, "output_length": 8, "hash_ids": [%s]}\n'
    % (1000 * i, 64 * (i % 4 + 1), b", ".join(b"%d" % k for k in range(i % 4 + 1)))
    for i in range(16)
)


def warm() -> None:
    """The kernels of a partition's read, analysis and state, and of a merge, loaded (or compiled, on
    a fresh install: once here rather than in every worker)."""
    try:
        fd, path = tempfile.mkstemp(suffix=".jsonl", prefix="kvset-warm-")
    except OSError:  # no writable temporary folder: each worker loads the kernels in its first task
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_LINES)
        parts, _ = plan_partitions([path], 2)
        analyze_run(parts, ReadConfig(horizon=DEFAULT_HORIZON), root=True)
    finally:
        os.unlink(path)


def _end_server(server: int) -> None:
    """The fork server, told to stop when its cluster closed, ends here rather than through the
    interpreter's teardown of numba, llvmlite and distributed (0.4 CPU s, on the client's wall time:
    it waits for the server). It holds nothing that teardown would save; its forked workers, another
    pid, end as usual."""
    if os.getpid() == server:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# popped, so that the workers forked from the server do not inherit the mark
if os.environ.pop(SERVER_ENV, None) == "1":
    warm()
    atexit.register(_end_server, os.getpid())
