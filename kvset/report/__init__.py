"""Reports of curves and snapshots as tables, text and JSON: one serializer per result, shared by
`kvset analyze`, `kvset-top --once` and the app's export.

tables: curve and working-set rows and their plain-text tables; as_text: the two text reports;
as_json: the two JSON objects; as_csv: the curve as CSV; caveats: the caveats every report carries;
policy_gap: Belady MIN beside LRU (`--opt`), as JSON and text.
"""

from kvset.report.as_csv import curve_csv, curve_rows_csv
from kvset.report.as_json import analysis_json, operating_point_json, snapshot_json
from kvset.report.as_text import analysis_text, snapshot_text
from kvset.report.caveats import CAVEATS, WINDOWED_CURVES, Caveat

__all__ = [
    "CAVEATS",
    "WINDOWED_CURVES",
    "Caveat",
    "analysis_json",
    "analysis_text",
    "curve_csv",
    "curve_rows_csv",
    "operating_point_json",
    "snapshot_json",
    "snapshot_text",
]
