"""`kvset-top --keymap FILE`: the app starts with the file's keys; a bad file is a usage error."""

from __future__ import annotations

import pytest

from kvset_tui.app import KvsetTopApp
from kvset_tui.cli import main


@pytest.fixture
def started(monkeypatch):
    """Run main() up to the app's start: the app it built and the key map it was given."""
    seen: dict = {}

    def fake_run(self, **kw):
        seen["app"] = self
        return 0

    real_set_keymap = KvsetTopApp.set_keymap

    def spy(self, keymap):
        seen["keymap"] = dict(keymap)
        real_set_keymap(self, keymap)

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(KvsetTopApp, "run", fake_run)
    monkeypatch.setattr(KvsetTopApp, "set_keymap", spy)
    monkeypatch.setattr("kvset_tui.cli.has_terminal", lambda: True)  # as in a terminal
    return seen


def test_the_app_starts_with_the_files_keys(started, tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text('"kvset.pause" = "P"\n"kvset.window" = "W, tab"\n')
    assert main(["--demo", "--keymap", str(keys)]) == 0
    assert started["keymap"] == {"kvset.pause": "P", "kvset.window": "W,tab"}


def test_without_the_flag_the_default_keys_stay(started):
    assert main(["--demo"]) == 0
    assert "keymap" not in started and "app" in started


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('"kvset.nope" = "x"\n', "unknown binding 'kvset.nope'"),
        ('"kvset.pause" = 3\n', "kvset.pause needs a key"),
        ("kvset.pause = \n", "is not valid TOML"),
        ('"kvset.pause" = "q"\n', "'q' would be both kvset.pause and kvset.quit"),  # Quit would be lost
        ('"kvset.pause" = "P"\n"kvset.window" = "x,P"\n', "'P' would be both"),
        (None, "cannot read key map"),
    ],
)
def test_a_bad_key_map_is_a_usage_error_naming_the_file(started, tmp_path, capsys, content, message):
    keys = tmp_path / "keys.toml"
    if content is not None:
        keys.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["--demo", "--keymap", str(keys)])
    assert exit_info.value.code == 2 and "app" not in started
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("kvset-top: error: ") and message in error and str(keys) in error


def test_a_key_map_with_once_is_a_usage_error(started, tmp_path, capsys):
    keys = tmp_path / "keys.toml"
    keys.write_text('"kvset.pause" = "P"\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["--demo", "--once", "--keymap", str(keys)])
    assert exit_info.value.code == 2
    assert "error: --keymap is for the full-screen app: --once has no keys" in capsys.readouterr().err
