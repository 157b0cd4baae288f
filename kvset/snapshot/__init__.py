"""Snapshots: one immutable value holding everything the views show, and the builder that makes it.

`model` holds the snapshot (a header and every figure's result, kvset.figures) and its totals;
`builder` reads the analyzer into the figures' inputs once per refresh and computes every figure once.
"""

from kvset.snapshot.model import InputRead, Snapshot, Totals

__all__ = ["InputRead", "Snapshot", "Totals"]
