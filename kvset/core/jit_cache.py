"""numba's on-disk cache kept in step with every source a compiled function was built from.

numba keys a cached function on the time stamp and size of its own file only. A kernel that calls
or inlines functions of another module (the kernels share kvset.core.hash_table and
kvset.core.intrinsics, the sampled analyzer its filter) keeps its old machine code when only that
other module changes: after a `git pull` of an editable install, kvset could run a kernel older
than its sources. So the caches of all compiled modules are dropped together whenever any of them
changes, judged by one stamp over their files' time stamps and sizes (a few stat calls at import).
A read-only install is left alone.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # kvset/
# Every module with numba functions: the cached ones and those compiled into them (tests/architecture
# checks the list).
COMPILED_MODULES = (
    "core/kernel.py",
    "core/kernel_runs.py",
    "core/ring_kernel.py",
    "core/live_slots.py",
    "core/slot_compaction.py",
    "core/fenwick.py",
    "core/hash_table.py",
    "core/intrinsics.py",
    "core/log_grid.py",
    "engine_model/free_queue.py",
    "engine_model/prefix_chain.py",
    "engine_model/u64_map.py",
    "core/opt_kernel.py",
    "core/opt_rope.py",
    "core/opt_runs.py",
    "core/opt_critical.py",
    "core/partial_sample.py",
    "core/partial_sample_merge.py",
    "core/partial_slots.py",
    "core/partial_stack_merge.py",
    "core/sampling_curve.py",
    "core/sampling_filter.py",
    "core/sampling_kernel.py",
    "core/sampling_slots.py",
    "core/pool_replay.py",
    "engine/resident_set.py",
    "formats/scan.py",
)
# Modules without compiled functions whose constants numba compiles into the kernels as literals: a
# change to them must drop the caches too.
COMPILED_CONSTANTS = ("core/kernel_layout.py",)
STAMP = PACKAGE / "core" / "__pycache__" / "compiled-sources.stamp"


def sources_stamp() -> str:
    digest = hashlib.sha256()
    for name in COMPILED_MODULES + COMPILED_CONSTANTS:
        st = (PACKAGE / name).stat()
        digest.update(f"{name} {st.st_mtime_ns} {st.st_size}\n".encode())
    return digest.hexdigest()


def kernels_on_disk() -> bool:
    """Whether the analyzer's kernels are compiled and cached. Not on a fresh install, nor after a change
    dropped the caches: the first batch then waits while numba compiles (tens of seconds), which the
    app says instead of only waiting for data (`make` compiles them at install: the Makefile)."""
    return any((PACKAGE / "core" / "__pycache__").glob("kernel.*.nbi"))


def drop_stale_caches() -> bool:
    """Remove the compiled modules' numba caches when their sources changed since the stamp; True if
    it did. Errors (a read-only tree, a file another process removed first) are ignored."""
    try:
        stamp = sources_stamp()
        if STAMP.exists() and STAMP.read_text() == stamp:
            return False
        for name in COMPILED_MODULES:
            module = PACKAGE / name
            for cached in (module.parent / "__pycache__").glob(f"{module.stem}.*.nb[ic]"):
                cached.unlink(missing_ok=True)
        STAMP.parent.mkdir(exist_ok=True)
        tmp = STAMP.with_suffix(f".{id(stamp)}.tmp")
        tmp.write_text(stamp)
        tmp.replace(STAMP)
        return True
    except OSError:
        return False
