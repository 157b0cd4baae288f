"""What the driver asks of Dask for a local cluster, without starting one (a LocalCluster test costs
seconds: tests/e2e/test_distributed_e2e.py starts the one the suite needs)."""

import dask
import distributed  # noqa: F401 - loads Dask's distributed settings, which the tests read

from kvset.distributed.server import worker_environ


def test_worker_processes_keep_the_adaptive_mmap_threshold():
    """Dask sets MALLOC_TRIM_THRESHOLD_ in its workers, which pins glibc's mmap threshold: every array
    above 128 kB is mapped and faulted in afresh. The driver leaves it out, and keeps the rest."""
    key = "distributed.nanny.pre-spawn-environ"
    assert "MALLOC_TRIM_THRESHOLD_" in dask.config.get(key)
    environ = worker_environ()[key]
    assert "MALLOC_TRIM_THRESHOLD_" not in environ
    assert environ == {k: v for k, v in dask.config.get(key).items() if k != "MALLOC_TRIM_THRESHOLD_"}
    assert environ  # Dask's other settings (one thread each for OpenMP, MKL, OpenBLAS) stay


def test_the_preload_ends_only_the_worker_server():
    """kvset.distributed.preload ends its process by os._exit, in the fork server alone: imported
    anywhere else (the layering test imports every module), the process keeps its exit code."""
    import subprocess
    import sys

    code = "import kvset.distributed.preload; raise SystemExit(3)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 3


def test_the_worker_server_gets_the_workers_environment_and_the_client_keeps_its_own(monkeypatch):
    """The fork server starts with Dask's worker environment and the mark the preload reads; the
    process that starts it (kvset analyze, the client) has its own environment back as it was."""
    from multiprocessing import forkserver

    from kvset.distributed import server

    seen: dict[str, str] = {}
    monkeypatch.setattr(server, "AVAILABLE", True)
    monkeypatch.setattr(forkserver, "set_forkserver_preload", lambda modules: None)
    monkeypatch.setattr(forkserver, "ensure_running", lambda: seen.update(server.os.environ))
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # the client's own: a worker's is Dask's
    before = dict(server.os.environ)
    server.start_worker_server()
    wanted = worker_environ()["distributed.nanny.pre-spawn-environ"]
    assert isinstance(wanted, dict) and wanted
    assert {k: seen.get(k) for k in wanted} == {k: str(v) for k, v in wanted.items()}
    assert seen[server.SERVER_ENV] == "1"
    assert dict(server.os.environ) == before
