"""kvset.core.jit_cache.kernels_on_disk against numba's own cache files (issue 20, item 8): the app
tells a first run, whose first batch waits for the kernels to compile, from one that waits for data."""

from __future__ import annotations

import numpy as np

from kvset.core import jit_cache
from kvset.core.stack_distance import new_analyzer
from kvset.units import StreamUnits


def test_the_kernels_read_as_on_disk_once_an_analyzer_has_run():
    # the first feed compiles and caches the kernels (or loads them): numba then has written its files
    a = new_analyzer(StreamUnits(16, "default"), horizon=64, order="forward")
    a.feed(np.arange(50, dtype=np.uint64) % 7, timestamps=np.linspace(0.0, 1.0, 50))
    assert a.curve().accesses == 50
    assert jit_cache.kernels_on_disk()


def test_a_package_without_cached_kernels_reads_as_a_first_run(tmp_path, monkeypatch):
    (tmp_path / "core" / "__pycache__").mkdir(parents=True)
    (tmp_path / "core" / "__pycache__" / "curve.cpython-311.pyc").write_bytes(b"")  # bytecode is not a kernel
    monkeypatch.setattr(jit_cache, "PACKAGE", tmp_path)
    assert not jit_cache.kernels_on_disk()
