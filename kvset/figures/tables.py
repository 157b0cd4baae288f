"""Plain-text tables and their cells, as every text report writes them (ASCII, monospace)."""

from __future__ import annotations

from collections.abc import Sequence

from kvset.quantities import SHORT_DIGITS, format_gib, percent

NOT_KNOWN = "-"  # plain-text tables stay ASCII


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """Plain monospace table; `align` is one of 'l'/'r' per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, align, strict=True)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]).rstrip()


def gib_cell(n_bytes: int | float | None) -> str:
    return format_gib(n_bytes, significant=SHORT_DIGITS) if n_bytes is not None else NOT_KNOWN


def percent_cell(x: float | None, digits: int = 2) -> str:
    return percent(x, digits, NOT_KNOWN)


def count_cell(n: int | None) -> str:
    return f"{n:,}" if n else NOT_KNOWN
