"""kvset: exact one-pass KV-cache working-set analysis (Mattson stack distances + a Fenwick tree).

The library never imports textual or rich; the live monitor lives in kvset_tui.
"""

from kvset.curve import HitRateCurve

__all__ = ["HitRateCurve"]
__version__ = "0.1.0"
