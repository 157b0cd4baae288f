"""User key maps: a TOML file that rebinds the app's keys by binding id.

    # ~/kvset-keys.toml, used as `kvset-top --keymap ~/kvset-keys.toml`
    "kvset.pause" = "space"
    "kvset.window" = "W,tab"      # several keys, comma-separated

Only the app's own binding ids (kvset.*) can be rebound; anything else is an error naming the
known ids, so a typo is caught at start-up instead of silently doing nothing.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path


class KeymapError(ValueError):
    """An unusable key map file: the command line prints it as a usage error."""


def load_keymap(path: str | Path, binding_ids: Iterable[str]) -> dict[str, str]:
    """binding id -> key string(s), checked against the app's binding ids."""
    known = sorted(set(binding_ids))
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise KeymapError(f"cannot read key map {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise KeymapError(f"key map {path} is not valid TOML: {exc}") from None
    keymap: dict[str, str] = {}
    for binding_id, keys in data.items():
        if binding_id not in known:
            raise KeymapError(f"key map {path}: unknown binding {binding_id!r} (known: {', '.join(known)})")
        if not isinstance(keys, str) or not keys.strip() or any(not k.strip() for k in keys.split(",")):
            raise KeymapError(f"key map {path}: {binding_id} needs a key such as \"space\" or \"ctrl+p\", "
                              f"got {keys!r}")  # fmt: skip
        keymap[binding_id] = ",".join(k.strip() for k in keys.split(","))
    return keymap
