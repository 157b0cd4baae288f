"""The library stays free of the TUI: importing kvset must not load textual or rich.

The import contracts (import-linter, run by `make test`) check kvset's own imports; this checks
the running process, where a third-party library may pull a UI package in by itself (httpx loads
rich for its command line when click is installed): kvset must add nothing beyond that.
"""

import pkgutil
import subprocess
import sys

import kvset
from tests.support.paths import ROOT

UI_PACKAGES = {"textual", "rich", "textual_plotext", "plotext"}
THIRD_PARTY = ("numpy", "numba", "msgspec", "zmq", "httpx", "prometheus_client", "cbor2")


def _modules_loaded_by(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    return set(out.stdout.split())


def _ui(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in UI_PACKAGES}


def test_importing_every_kvset_module_loads_no_ui_package_of_its_own():
    names = ["kvset"] + [
        m.name for m in pkgutil.walk_packages(kvset.__path__, "kvset.") if not m.name.endswith("__main__")
    ]
    loaded = _modules_loaded_by("; ".join(f"import {n}" for n in names))
    assert set(names) <= loaded  # every module really was imported
    baseline = _modules_loaded_by("; ".join(f"import {n}" for n in THIRD_PARTY))
    assert not any(m.split(".")[0] == "textual" for m in baseline)
    offenders = sorted(_ui(loaded) - _ui(baseline))
    assert offenders == [], f"kvset imports UI libraries: {offenders[:5]}"
