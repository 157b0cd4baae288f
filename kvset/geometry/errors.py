"""The one error type of kvset.geometry: a message a user can act on, naming the field at fault."""

from __future__ import annotations


class GeometryError(ValueError):
    """A model geometry could not be built or used; the message names the field or input at fault."""


class UnknownPresetError(GeometryError):
    """A name that is neither a built-in preset nor a readable config.json path."""

    def __init__(self, name: str, suggestions: list[str]):
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(
            f"unknown model {name!r}: not a built-in preset and not a config.json path{hint} "
            "(`kvset model --list` lists the presets)"
        )
