"""ZMQ endpoint specs as users give them: port ranges for data-parallel ranks, replay endpoints.

Pure text handling: nothing here opens a socket. Every function raises ValueError with a message
fit for the command line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_RANGE = re.compile(r"^(?P<base>.*):(?P<lo>\d+)-(?P<hi>\d+)$")
_PORT = re.compile(r"^(?P<base>.*):(?P<port>\d+)$")


def expand_endpoints(spec: str, max_endpoints: int = 256) -> list[str]:
    """`tcp://host:5557-5560` -> one endpoint per port (one per data-parallel rank)."""
    spec = spec.strip()
    match = _RANGE.match(spec)
    if not match:
        return [spec]
    lo, hi = int(match["lo"]), int(match["hi"])
    if not 0 < lo <= hi <= 65535:
        raise ValueError(f"bad port range in {spec!r}")
    if hi - lo + 1 > max_endpoints:
        raise ValueError(f"port range in {spec!r} names more than {max_endpoints} endpoints")
    return [f"{match['base']}:{port}" for port in range(lo, hi + 1)]


def offset_port(endpoint: str, offset: int) -> str:
    """The endpoint of data-parallel rank `offset`: vLLM and SGLang publish rank r on port + r."""
    match = _PORT.match(endpoint)
    if not match:
        raise ValueError(f"cannot offset the port of {endpoint!r}")
    return f"{match['base']}:{int(match['port']) + offset}"


def connect_address(endpoint: str) -> str:
    """A valid ZMQ address to connect to, or ValueError.

    `host:port` means tcp; the engine's bind form `tcp://*:5557` means this host.
    """
    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = "tcp://" + endpoint
    endpoint = re.sub(r"^tcp://(\*|0\.0\.0\.0):", "tcp://127.0.0.1:", endpoint)
    scheme, _, rest = endpoint.partition("://")
    if scheme not in ("tcp", "ipc", "inproc") or not rest:
        raise ValueError(f"bad endpoint {endpoint!r}: expected tcp://HOST:PORT (or ipc://PATH)")
    if scheme == "tcp":
        match = _PORT.match(rest)
        if not match or not match["base"] or not 0 < int(match["port"]) <= 65535:
            raise ValueError(f"bad endpoint {endpoint!r}: expected tcp://HOST:PORT")
    return endpoint


def pair_replay_endpoints(endpoints: list[str], replay_endpoints: Iterable[str] | None) -> list[str | None]:
    """One replay endpoint per publisher endpoint (a single one is offset by rank, as vLLM does)."""
    replays = [e for spec in (replay_endpoints or []) for e in expand_endpoints(spec)]
    if not replays:
        return [None] * len(endpoints)
    if len(replays) == len(endpoints):
        return list(replays)
    if len(replays) == 1:
        return [offset_port(replays[0], rank) for rank in range(len(endpoints))]
    raise ValueError(f"{len(replays)} replay endpoints for {len(endpoints)} event endpoints")


def event_addresses(
    endpoints: Iterable[str], replay_endpoints: Iterable[str] | None
) -> tuple[list[str], list[str | None]]:
    """(publisher addresses, their replay addresses or None) from the specs a user gave."""
    expanded = [e for spec in endpoints for e in expand_endpoints(spec)]
    if not expanded:
        raise ValueError("no event endpoint given")
    replays = pair_replay_endpoints(expanded, replay_endpoints)
    return (
        [connect_address(e) for e in expanded],
        [None if r is None else connect_address(r) for r in replays],
    )
