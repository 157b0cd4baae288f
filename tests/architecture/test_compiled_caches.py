"""numba's caches follow every source they were compiled from (kvset.core.jit_cache): each module with
cached compiled functions is on the list, and a change to one of them drops the caches of all."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from kvset.core import jit_cache
from tests.support.paths import ROOT

NUMBA = re.compile(r"^(from numba import|import numba)", re.MULTILINE)
# the rope's decorators, which other modules of the optimal curve compile with (inlined or called)
ROPE_DECORATOR = re.compile(r"^@(inline_plain|plain)$", re.MULTILINE)


def test_every_module_with_compiled_functions_is_listed():
    # a cached function keeps the machine code of what it calls from other modules: all of them count
    package = ROOT / "kvset"
    found = {
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if NUMBA.search(p.read_text()) or ROPE_DECORATOR.search(p.read_text())
    }
    assert found == set(jit_cache.COMPILED_MODULES)


def test_the_constants_stamped_with_them_are_what_the_kernels_import():
    # numba freezes a global constant into the machine code: its module is stamped like a compiled one
    package = ROOT / "kvset"
    compiled = "\n".join((package / name).read_text() for name in jit_cache.COMPILED_MODULES)
    for name in jit_cache.COMPILED_CONSTANTS:
        module = name.removesuffix(".py").replace("/", ".")
        assert (
            f"kvset.{module} import" in compiled
            or f"from kvset.{module.rsplit('.', 1)[0]} import {module.rsplit('.', 1)[1]}" in compiled
        )
        assert "def " not in (package / name).read_text()  # constants only: a function would be compiled


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """The compiled modules and fake caches of them in a copy, with jit_cache pointed at it."""
    copy = tmp_path / "kvset"
    for name in jit_cache.COMPILED_MODULES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "kvset" / name, copy / name)
        cache = copy / name.rsplit("/", 1)[0] / "__pycache__"
        cache.mkdir(exist_ok=True)
        stem = Path(name).stem
        for suffix in ("py311.nbi", "py311.1.nbc"):
            (cache / f"{stem}.some_function-10.{suffix}").write_bytes(b"x")
    for name in jit_cache.COMPILED_CONSTANTS:
        shutil.copy(ROOT / "kvset" / name, copy / name)
    (copy / "core" / "__pycache__" / "analyzer.cpython-311.pyc").write_bytes(b"x")  # not numba's
    monkeypatch.setattr(jit_cache, "PACKAGE", copy)
    monkeypatch.setattr(jit_cache, "STAMP", copy / "core" / "__pycache__" / "compiled-sources.stamp")
    return copy


def caches(copy: Path) -> list[str]:
    return sorted(p.name for p in copy.rglob("*.nb[ic]"))


@pytest.mark.parametrize("changed", ["core/kernel.py", "core/kernel_layout.py"])
def test_a_change_to_any_compiled_module_drops_every_modules_cache(package_copy, changed):
    assert jit_cache.drop_stale_caches()  # no stamp yet: the caches may be from any source
    assert (
        caches(package_copy) == [] and (package_copy / "core/__pycache__/analyzer.cpython-311.pyc").exists()
    )
    for name in jit_cache.COMPILED_MODULES:  # numba writes its caches again
        (
            package_copy / name.rsplit("/", 1)[0] / "__pycache__" / f"{Path(name).stem}.f-1.py311.nbi"
        ).write_bytes(b"x")
    assert not jit_cache.drop_stale_caches()  # nothing changed: kept
    assert len(caches(package_copy)) == len(jit_cache.COMPILED_MODULES)
    kernel = package_copy / changed  # only a module the others inline, or their constants, changes
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    os.utime(kernel, ns=(kernel.stat().st_atime_ns, kernel.stat().st_mtime_ns + 10**9))
    assert jit_cache.drop_stale_caches()
    assert caches(package_copy) == []  # sampling_kernel's and opt_kernel's too
