"""kvset serve hands the memory its threads freed back to the system (glibc's malloc keeps it in its
arenas otherwise: 70 to 90 MiB under `make bench-flood`): a fixed mmap threshold from the start and
a trim after a snapshot at most every TRIM_EVERY_S."""

from __future__ import annotations

import sys

import pytest

from kvset.cli.serve import M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, TRIM_EVERY_S, HeapTrim, glibc_malloc


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


def test_the_threshold_is_fixed_at_once_and_snapshots_trim_at_most_every_few_seconds() -> None:
    libc, now = FakeLibc(), [100.0]
    trim = HeapTrim(libc, clock=lambda: now[0])
    assert libc.calls == [("mallopt", M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)]
    trimmed = []
    for step in range(1, 41):  # snapshots every 0.25 s for 10 s
        now[0] = 100.0 + step * 0.25
        before = trim.trims
        trim(object())
        if trim.trims > before:
            trimmed.append(now[0])
    assert trimmed == [100.0 + TRIM_EVERY_S * k for k in range(1, 6)]
    assert libc.calls[1:] == [("malloc_trim", 0)] * 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_on_linux_the_c_library_offers_both_calls() -> None:
    libc = glibc_malloc()
    assert libc is not None
    assert libc.malloc_trim(0) in (0, 1)


def test_kvset_serve_installs_the_trim_as_a_snapshot_listener(monkeypatch) -> None:
    from kvset.cli import serve

    seen = []
    monkeypatch.setattr(serve, "glibc_malloc", FakeLibc)

    class Monitor:
        def add_listener(self, listener) -> None:
            seen.append(listener)

        def run(self, stop, publish) -> None:
            pass

    monkeypatch.setattr(serve, "build_monitor", lambda args: Monitor())
    args = serve_args()
    assert serve.run(args) == 0
    assert any(isinstance(listener, HeapTrim) for listener in seen)


def serve_args():
    from kvset.cli import build_parser

    return build_parser(["serve"]).parse_args(["serve", "--demo", "--listen", "127.0.0.1:0"])
