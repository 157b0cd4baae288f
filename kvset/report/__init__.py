"""Reports of a snapshot as text, JSON and CSV: one serializer per result, shared by `kvset analyze`,
`kvset-top --once` and the app's export.

as_json: the one JSON object (a header, then every figure's own keys); as_text: the two text reports
(a file's and a live monitor's), each a header and then every figure's own lines; as_csv: the curve
as CSV (and the principals' curves, with --by); caveats: the caveats every report carries. The figures write their own parts (kvset.figures).
"""

from kvset.report.as_csv import curve_csv, curve_rows_csv, principals_csv
from kvset.report.as_json import snapshot_json
from kvset.report.as_text import analysis_text, snapshot_text
from kvset.report.caveats import CAVEATS, WINDOWED_CURVES, Caveat

__all__ = [
    "CAVEATS",
    "WINDOWED_CURVES",
    "Caveat",
    "analysis_text",
    "curve_csv",
    "curve_rows_csv",
    "principals_csv",
    "snapshot_json",
    "snapshot_text",
]
