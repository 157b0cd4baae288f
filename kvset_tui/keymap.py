"""User key maps: a TOML file that rebinds the app's keys by binding id.

    # ~/kvset-keys.toml, used as `kvset-top --keymap ~/kvset-keys.toml`
    "kvset.pause" = "P"
    "kvset.window" = "W,tab"      # several keys, comma-separated

Only the app's own binding ids (kvset.*) can be rebound; anything else is an error naming the
known ids, so a typo is caught at start-up instead of silently doing nothing. A key that would then
do two things (pause bound to q takes quit's key) is an error too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path


class KeymapError(ValueError):
    """An unusable key map file: the command line prints it as a usage error."""


def load_keymap(path: str | Path, default_keys: Mapping[str, str]) -> dict[str, str]:
    """binding id -> key string(s), checked against the app's bindings (`default_keys`: id -> its keys)."""
    known = sorted(default_keys)
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
            raise KeymapError(
                f'key map {path}: {binding_id} needs a key such as "space" or "ctrl+p", got {keys!r}'
            )
        keymap[binding_id] = ",".join(k.strip() for k in keys.split(","))
    owner: dict[str, str] = {}
    for binding_id in known:
        for key in keymap.get(binding_id, default_keys[binding_id]).split(","):
            if key in owner and owner[key] != binding_id:
                raise KeymapError(
                    f"key map {path}: {key!r} would be both {owner[key]} and {binding_id}: "
                    "give one of them another key"
                )
            owner[key] = binding_id
    return keymap
