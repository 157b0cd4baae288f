"""The screenshots are compared under the Textual and rich they were made with.

A different Textual draws a different SVG for the same screen, so the forty snapshot tests would all
fail with pixel diffs that say nothing about kvset-top. The `dev` extra pins both (pyproject.toml);
this test says which one differs when an environment was installed some other way.
"""

import importlib.metadata
import re
import tomllib

from tests.support.paths import ROOT


def _dev_pins() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    return dict(m.groups() for m in (re.fullmatch(r"([\w-]+)==([\w.]+)", r) for r in extra) if m)


def test_textual_and_rich_are_the_versions_the_screenshots_were_made_with():
    pins = _dev_pins()
    assert {"textual", "rich"} <= set(pins)
    installed = {name: importlib.metadata.version(name) for name in pins}
    assert installed == pins, "reinstall with `pip install -e '.[dev]'`: the screenshots need these"
