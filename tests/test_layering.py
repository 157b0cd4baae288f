"""The library stays free of the TUI: importing kvset must not load textual or rich."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules_loaded_by(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    return set(out.stdout.split())


def test_importing_kvset_loads_neither_textual_nor_rich():
    import pkgutil

    import kvset

    names = ["kvset"] + [m.name for m in pkgutil.walk_packages(kvset.__path__, "kvset.") if not m.name.endswith("__main__")]
    loaded = _modules_loaded_by("; ".join(f"import {n}" for n in names))
    assert "kvset.cli" in loaded or "kvset" in loaded
    offenders = sorted(m for m in loaded if m.split(".")[0] in {"textual", "rich", "textual_plotext", "plotext"})
    assert offenders == [], f"kvset imports UI libraries: {offenders[:5]}"


def test_no_kvset_source_file_mentions_textual_or_rich_imports():
    bad = []
    for path in (ROOT / "kvset").rglob("*.py"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and any(
                stripped.split()[1].split(".")[0] == lib for lib in ("textual", "rich", "textual_plotext", "plotext")
            ):
                bad.append(f"{path.relative_to(ROOT)}:{lineno}")
    assert bad == []
