"""The caveats that go with every number kvset reports, defined once: reports print the short
form, the app's help screen the long one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caveat:
    name: str
    short: str  # one sentence, printed with every report and kept in its JSON
    long: str  # the help screen's explanation

    @property
    def line(self) -> str:
        return f"{self.name}: {self.short}"


CAVEATS: tuple[Caveat, ...] = (
    Caveat(
        "LRU only",
        "a policy with foresight (Belady MIN) needs at most these capacities.",
        "a policy with foresight (Belady MIN) needs at most this capacity: the working set is an upper "
        "bound for it, the curve a lower bound.",
    ),
    Caveat(
        "Full attention only",
        "hybrid layers (sliding window, linear attention, SSM) are sized separately.",
        "hybrid layers (sliding window, linear attention, Mamba/SSM) hold state per running request, not "
        "per shared prefix; they are estimated in the reserve panel.",
    ),
    Caveat(
        "Today's trace",
        "the working set drifts as the workload changes.",
        "the working set drifts as the workload changes; watch its trend and the churn panel, and size "
        "with headroom.",
    ),
)

# Only the live views have windowed curves, so only they carry this one.
WINDOWED_CURVES = Caveat(
    "Windows",
    "windowed working sets are upper bounds within one step of the capacity grid.",
    "windowed curves are read on a capacity grid: their working sets (≤) are upper bounds within one grid "
    "step. The all-time curve is exact up to the horizon.",
)


def caveat_lines() -> list[str]:
    """The caveats as reports print them and their JSON holds them."""
    return [c.line for c in CAVEATS]
