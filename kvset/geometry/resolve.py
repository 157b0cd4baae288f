"""`--model NAME|config.json`: a built-in preset by name, else a local config.json (or its directory)."""

from __future__ import annotations

from pathlib import Path

from kvset.geometry.errors import GeometryError, UnknownPresetError
from kvset.geometry.hf_config import geometry_from_file
from kvset.geometry.model import ModelGeometry
from kvset.geometry.presets import PRESETS, load_preset, suggest_presets


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or "\\" in spec or spec.endswith(".json") or spec.startswith((".", "~"))


def load_model(spec: str) -> ModelGeometry:
    """Preset names win over same-named paths; a name that is neither gets close preset suggestions."""
    if not isinstance(spec, str) or not spec.strip():
        raise GeometryError("a model is a preset name or a path to a config.json; got an empty name")
    if spec.strip().lower() in PRESETS:
        return load_preset(spec)
    path = Path(spec).expanduser()
    if path.exists() or _looks_like_path(spec):
        return geometry_from_file(path)
    raise UnknownPresetError(spec, suggest_presets(spec))
