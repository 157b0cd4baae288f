"""The span the principals' figures cover (part of the principals figure, kvset.figures.principals).

Live (`kvset-top`, `kvset serve`), the collector keeps the last --by-window accesses only
(kvset.core.principals_window), so that a long stream's memory stays flat: every per-principal
figure is then of those accesses, and the text, the JSON (`principals_window`) and the exporter
(`kvset_principal_window_*`) say which. `kvset analyze` reads a file whole: its figures are of all
of it, and say so too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kvset.figures.base import SERVE, TOP, Json, MetricFamily, MetricSample, Option, gauge
from kvset.quantities import age as span_text
from kvset.quantities import compact

if TYPE_CHECKING:  # every command line reads the options: numpy is loaded by the collector only
    from kvset.core.principals_window import WindowSpan

# accesses: about 100 MB at a read's peak (see the README), and tens of times a GPU pool's blocks, so
# the pool replay over them is warm for most of the window
DEFAULT_PRINCIPAL_WINDOW = 1 << 20
BY_WINDOW: Option[int] = Option(
    "--by-window",
    "principals_window",
    DEFAULT_PRINCIPAL_WINDOW,
    f"with --by: the principals' figures are of the last ACCESSES accesses (default "
    f"{DEFAULT_PRINCIPAL_WINDOW:,}; about 100 bytes of memory each), so a long stream's memory "
    "stays flat; the outputs say the span they cover",
    commands=frozenset({TOP, SERVE}),
    argtype="positive_int",
    metavar="ACCESSES",
)


def window_json(span: WindowSpan | None, accesses: int) -> Json:
    """`accesses` covered, of the `stream_accesses` seen, in a window of `window_accesses` (null: the
    whole stream is kept), over `seconds` of stream time."""
    return {
        "accesses": accesses,
        "stream_accesses": accesses if span is None else span.seen,
        "window_accesses": None if span is None else span.capacity,
        "seconds": None if span is None else span.seconds,
        "whole_stream": True if span is None else span.whole_stream,
    }


def window_label(span: WindowSpan | None, short: bool = False) -> str | None:
    """'the last 4,194,304 accesses of 20,000,000, 13 min of the stream (--by-window)', or 'all
    1,000 accesses so far ...' while the window holds them all; None where no window bounds them (a
    file, read whole). Short: 'last 4.2M accesses', and None while the window holds them all."""
    if span is None or span.capacity is None:
        return None
    if short:
        return None if span.whole_stream else f"last {compact(span.accesses)} accesses"
    took = "" if span.seconds is None else f", {span_text(span.seconds)} of the stream"
    if span.whole_stream:
        return (
            f"all {span.accesses:,} accesses so far{took}; {BY_WINDOW.flag} keeps the last {span.capacity:,}"
        )
    return f"the last {span.accesses:,} accesses of {span.seen:,}{took} ({BY_WINDOW.flag})"


def window_metrics(span: WindowSpan | None, accesses: int) -> Iterable[MetricFamily]:
    yield gauge(
        "kvset_principal_window_accesses",
        "accesses the kvset_principal_* figures are of: the last ones, --by-window at most",
        accesses,
    )
    yield MetricFamily(
        "kvset_principal_window_seconds",
        "gauge",
        "stream time from the first to the last request of those accesses",
        (),
        () if span is None or span.seconds is None else (MetricSample((), span.seconds),),
    )
