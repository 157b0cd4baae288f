"""Themes as data: `kvset_tui/themes/*.toml` (a data package, so a plain checkout finds them too) turned into
a Textual theme, Rich styles for the panels and Plotext colours for the curve.

A theme names its colours by meaning (curve_all, engine, bad, ...). A truecolour theme gives
"#rrggbb"; an ANSI theme (`ansi = true`) may only use the 16 ANSI colour names and "default",
so a 16-colour terminal shows it with its own palette.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# textual is loaded when the app draws, not for `kvset-top --help`, which lists the themes
if TYPE_CHECKING:
    from textual.theme import Theme

ANSI_BASE = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
ANSI_NAMES = frozenset(("default", *ANSI_BASE, *(f"bright_{c}" for c in ANSI_BASE)))

# Plotext's names for the 16 ANSI colours (it calls yellow "orange" and white "gray+").
_PLOTEXT_ANSI = {
    "default": "default",
    "black": "black",
    "red": "red",
    "green": "green",
    "yellow": "orange",
    "blue": "blue",
    "magenta": "magenta",
    "cyan": "cyan",
    "white": "gray+",
    "bright_black": "gray",
    "bright_red": "red+",
    "bright_green": "green+",
    "bright_yellow": "orange+",
    "bright_blue": "blue+",
    "bright_magenta": "magenta+",
    "bright_cyan": "cyan+",
    "bright_white": "white",
}

TEXTUAL_KEYS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
)
PANEL_KEYS = (
    "curve_all",
    "curve_window",
    "engine",
    "marker",
    "ticks",
    "ok",
    "warn",
    "bad",
    "muted",
    "spark",
    "banner_fg",
    "banner_bg",
)
REQUIRED_KEYS = TEXTUAL_KEYS + PANEL_KEYS

DEFAULT_THEME = "dark"
NO_COLOR_THEME = "mono"


class ThemeError(ValueError):
    """A theme file is missing, malformed, or uses a colour its kind does not allow."""


@dataclass(frozen=True)
class KvsetTheme:
    name: str
    description: str
    dark: bool
    ansi: bool
    colors: dict[str, str] = field(default_factory=dict)

    @property
    def textual_name(self) -> str:
        return f"kvset-{self.name}"

    @property
    def monochrome(self) -> bool:
        return all(v == "default" for v in self.colors.values())

    def rich(self, key: str) -> str:
        """The colour as a Rich style colour ("#rrggbb", an ANSI name, or "default")."""
        return self.colors[key]

    def plotext(self, key: str) -> str | tuple[int, int, int]:
        value = self.colors[key]
        if self.ansi:
            return _PLOTEXT_ANSI[value]
        return _hex_to_rgb(value)

    def textual_theme(self) -> Theme:
        def conv(value: str) -> str:
            return f"ansi_{value}" if self.ansi else value

        base = {k: conv(self.colors[k]) for k in TEXTUAL_KEYS}
        if self.ansi and base["primary"] == "ansi_default":
            # Textual derives shades from primary and needs a real colour there; without
            # colour (NO_COLOR) the app's filter strips it again.
            base["primary"] = "ansi_white"
        for key in ("secondary", "accent", "warning", "error", "success"):
            if base[key] == "ansi_default":
                base[key] = base["primary"]
        variables = {}
        boost = None
        if self.ansi:
            boost = "ansi_default"
            variables = {
                "ansi-background": "ansi_black" if self.dark else "ansi_white",
                "ansi-foreground": "ansi_white" if self.dark else "ansi_black",
                "scrollbar": conv(self.colors["muted"])
                if self.colors["muted"] != "default"
                else "ansi_default",
                "scrollbar-background": "ansi_default",
                "scrollbar-corner-color": "ansi_default",
                "border": conv(self.colors["muted"]) if self.colors["muted"] != "default" else "ansi_default",
                "border-blurred": "ansi_default",
                "footer-key-foreground": base["accent"],
                "footer-background": "ansi_default",
                "footer-description-background": "ansi_default",
                "footer-item-background": "ansi_default",
            }
        from textual.theme import Theme

        return Theme(
            name=self.textual_name,
            dark=self.dark,
            ansi=self.ansi,
            boost=boost,
            variables=variables,
            **base,  # type: ignore[arg-type]  # only Theme's colour fields (TEXTUAL_KEYS), each a str
        )


def _hex_to_rgb(value: str) -> tuple[int, int, int]:
    v = value.lstrip("#")
    return (int(v[0:2], 16), int(v[2:4], 16), int(v[4:6], 16))


def _is_hex(value: str) -> bool:
    if len(value) != 7 or not value.startswith("#"):
        return False
    try:
        int(value[1:], 16)
    except ValueError:
        return False
    return True


def parse_theme(text: str, origin: str = "<theme>") -> KvsetTheme:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{origin}: not valid TOML: {exc}") from exc
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ThemeError(f"{origin}: needs a name")
    ansi = bool(data.get("ansi", False))
    colors = data.get("colors")
    if not isinstance(colors, dict):
        raise ThemeError(f"{origin}: needs a [colors] table")
    missing = [k for k in REQUIRED_KEYS if k not in colors]
    if missing:
        raise ThemeError(f"{origin}: missing colours: {', '.join(missing)}")
    for key, value in colors.items():
        if not isinstance(value, str):
            raise ThemeError(f"{origin}: colour {key} must be a string")
        if ansi and value not in ANSI_NAMES:
            raise ThemeError(f"{origin}: ANSI theme colour {key}={value!r} is not one of the 16 ANSI names")
        if not ansi and not _is_hex(value):
            raise ThemeError(f"{origin}: colour {key}={value!r} must be #rrggbb")
    return KvsetTheme(
        name=name,
        description=str(data.get("description", "")),
        dark=bool(data.get("dark", True)),
        ansi=ansi,
        colors={k: colors[k] for k in REQUIRED_KEYS},
    )


def _theme_files() -> dict[str, str]:
    """name -> TOML text of every shipped theme (the data package kvset_tui/themes/)."""
    root = importlib.resources.files("kvset_tui.themes")
    return {
        entry.name[: -len(".toml")]: entry.read_text(encoding="utf-8")
        for entry in root.iterdir()
        if entry.name.endswith(".toml")
    }


def available_themes() -> list[str]:
    return sorted(_theme_files())


def load_theme(name: str) -> KvsetTheme:
    files = _theme_files()
    if name not in files:
        raise ThemeError(f"unknown theme {name!r}; available: {', '.join(sorted(files))}")
    return parse_theme(files[name], origin=f"kvset_tui/themes/{name}.toml")


def no_color_requested(environ: dict[str, str] | None = None) -> bool:
    """NO_COLOR present means no colour (https://no-color.org).

    The spec ignores an empty value, but Textual strips colour whenever the variable is present,
    so the app follows Textual: a monochrome theme then looks right instead of greyed-out.
    """
    env = os.environ if environ is None else environ
    return "NO_COLOR" in env


def choose_theme(requested: str | None, environ: dict[str, str] | None = None) -> KvsetTheme:
    """The theme to use: NO_COLOR wins over --theme; otherwise the requested one or the default."""
    if no_color_requested(environ):
        return load_theme(NO_COLOR_THEME)
    return load_theme(requested or DEFAULT_THEME)
