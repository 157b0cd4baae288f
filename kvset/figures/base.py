"""The plain values a figure is made of: its options as data, and what its outputs are written with
(the sizes of a block, the text view, Prometheus samples as plain data). The figure itself and what it
is computed from are in kvset.figures.inputs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from kvset.quantities import GIB

T = TypeVar("T")

Json = dict[str, Any]

# The commands that compute figures (and take their options); `kvset model` and `kvset verify` share a
# few of the options without computing figures.
ANALYZE, TOP, SERVE, MODEL, VERIFY = "analyze", "top", "serve", "model", "verify"
PIPELINES: frozenset[str] = frozenset({ANALYZE, TOP, SERVE})
LIVE: frozenset[str] = frozenset({TOP, SERVE})


@dataclass(frozen=True)
class Option(Generic[T]):
    """One command-line option of a figure (or of the inputs every figure reads), as data.

    `default` is the value when the flag is not given, already parsed. `argtype` names a value type of
    kvset.cli.argtypes, checked while the command line is parsed (a usage error); `parse` reads the text
    afterwards, where a ValueError is the one-line error naming the value. `switch`: a flag without a
    value (on when given). `group` is the --help section it is listed in; `help_for` replaces the help
    for the commands named.
    """

    flag: str
    dest: str
    default: T
    help: str
    commands: frozenset[str] = PIPELINES
    parse: Callable[[str], T] | None = None
    argtype: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False
    repeat: bool = False  # the flag may be given several times; `parse` reads the values joined by ","
    group: str = "analysis"
    help_for: Mapping[str, str] = field(default_factory=dict)

    def help_text(self, command: str) -> str:
        return self.help_for.get(command, self.help)

    def read(self, given: object) -> T:
        """The option's value from what the parser holds (None: not given)."""
        if given is None:
            return self.default
        if self.parse is not None and isinstance(given, list):
            return self.parse(",".join(given))
        if self.parse is not None and isinstance(given, str):
            return self.parse(given)
        return cast(T, given)


class OptionValues:
    """The parsed value of every option a command was given; an option not given has its default."""

    def __init__(self, values: Mapping[str, object] | None = None) -> None:
        self._values = dict(values or {})

    def get(self, option: Option[T]) -> T:
        if option.dest in self._values and self._values[option.dest] is not None:
            return cast(T, self._values[option.dest])
        return option.default

    def given(self, option: Option[Any]) -> bool:
        return self._values.get(option.dest) is not None

    def replace(self, **values: object) -> OptionValues:
        return OptionValues({**self._values, **values})


@dataclass(frozen=True)
class Sizes:
    """A capacity in blocks, also in tokens and (with a model) bytes and GiB, as every report gives it."""

    block_tokens: int | None
    bytes_per_block: int | None

    def tokens(self, blocks: int | None) -> int | None:
        return blocks * self.block_tokens if blocks is not None and self.block_tokens else None

    def bytes(self, blocks: int | None) -> int | None:
        return blocks * self.bytes_per_block if blocks is not None and self.bytes_per_block else None

    def json(self, blocks: int | None, prefix: str = "capacity") -> Json:
        """{capacity_blocks, capacity_tokens, capacity_bytes, capacity_gib} (null where not known)."""
        n_bytes = self.bytes(blocks)
        return {
            f"{prefix}_blocks": blocks,
            f"{prefix}_tokens": self.tokens(blocks),
            f"{prefix}_bytes": n_bytes,
            f"{prefix}_gib": None if n_bytes is None else n_bytes / GIB,
        }


@dataclass(frozen=True)
class TextView:
    """What a text report shows of a figure: a window and a target mode; `live`: kvset-top --once's
    report (False: kvset analyze's, which has no sources and no engine)."""

    sizes: Sizes
    window: str = "all"
    mode: str = "coverage"
    live: bool = True
    accesses: int = 0  # of the whole stream: without any, a live report says so once, not per figure
    horizon_reached: bool = False

    @property
    def with_gib(self) -> bool:
        return bool(self.sizes.bytes_per_block)


@dataclass(frozen=True)
class MetricSample:
    labels: tuple[str, ...]
    value: float
    buckets: tuple[
        tuple[float, float], ...
    ] = ()  # a histogram's (le, cumulative count), +Inf last; value: its sum


@dataclass(frozen=True)
class MetricFamily:
    """One Prometheus metric family as plain data (kvset.exporter makes prometheus_client's of it)."""

    name: str
    kind: str  # gauge | counter | histogram
    help: str
    labels: tuple[str, ...] = ()
    samples: tuple[MetricSample, ...] = ()


def gauge(name: str, help: str, value: float) -> MetricFamily:
    """A family of one unlabelled value."""
    return MetricFamily(name, "gauge", help, (), (MetricSample((), float(value)),))


@dataclass(frozen=True)
class MetricsView:
    """What the exporter asks of a figure: hit rates at these capacities too (--capacities of kvset
    serve), the horizon (the stack-distance buckets end there) and the sizes."""

    sizes: Sizes
    horizon: int
    capacities: tuple[int, ...] = ()


def no_text(result: object, view: TextView) -> list[str]:
    return []


def no_metrics(result: object, view: MetricsView) -> Iterable[MetricFamily]:
    return ()
