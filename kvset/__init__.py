"""kvset: exact one-pass KV-cache working-set analysis (Mattson stack distances + a Fenwick tree).

    from kvset import Analyzer
    a = Analyzer(horizon=1 << 22, order="forward")
    a.feed(keys)                 # numpy uint64, one access each
    a.curve().working_set(0.95)

The library never imports textual or rich; the live monitor lives in kvset_tui.
"""

__all__ = ["Analyzer", "HitRateCurve"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The analyzer pulls in numba and the curve numpy; load them on first use so that `import kvset`
    # (every command line, `--version` included) stays quick.
    if name == "Analyzer":
        from kvset.core.analyzer import Analyzer

        return Analyzer
    if name == "HitRateCurve":
        from kvset.core.curve import HitRateCurve

        return HitRateCurve
    raise AttributeError(f"module 'kvset' has no attribute {name!r}")
