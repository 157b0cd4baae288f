"""The text report's columns say what they hold: the knee's column has a header, and the working
sets' trend gives the change over its windows instead of repeating the working set."""

from __future__ import annotations

import numpy as np

from kvset.core.stack_distance import new_analyzer
from kvset.figures.base import Sizes
from kvset.figures.curve import WindowCurve, curve_table
from kvset.figures.tables import NOT_KNOWN
from kvset.figures.working_sets import trend_cell
from kvset.units import StreamUnits


def test_the_knee_column_has_a_header_and_marks_the_knee_row_only():
    a = new_analyzer(StreamUnits(16, "default"))
    # a loop over 400 blocks: the curve rises to its plateau at 400, the knee
    a.feed(np.tile(np.arange(400, dtype=np.uint64), 20))
    window = WindowCurve("all", a.curve())
    knee = window.knee_capacity()
    assert knee is not None
    header, *body = curve_table(window.rows, Sizes(16, None), knee).splitlines()
    assert header.split()[-1] == "knee"
    marked = [line for line in body if line.rstrip().endswith("<- knee")]
    assert len(marked) == 1 and marked[0].split()[0] == f"{knee:,}"


def test_the_trend_cell_is_the_change_over_its_windows():
    assert trend_cell((6_783, 6_000, 4_735)) == "-30 % in 3 windows"
    assert trend_cell((100, None, 100)) == "+0 % in 2 windows"
    assert trend_cell((5_000,)) == NOT_KNOWN and trend_cell(()) == NOT_KNOWN
