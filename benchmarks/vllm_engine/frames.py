"""Recorded KV event streams: the file format, a reader, a writer and a summary.

A `.zmqframes.gz` file is gzip-compressed; uncompressed it is

    b"KVSET-ZMQ-FRAMES v1\\n"
    then per ZMQ message received, in order:
        f64  receive time, Unix seconds (big-endian IEEE 754)
        u32  number of frames n (big-endian)
        n times: u32 frame length (big-endian), the frame's bytes

vLLM's publisher sends 3 frames per message: topic (empty by default), the 8-byte big-endian
sequence number, and the msgpack payload `[ts, [event, ...], data_parallel_rank]`, each event a
map with "type" ("BlockStored", "BlockRemoved", "AllBlocksCleared"). The frames are the bytes as
they came off the wire, untouched.

    python frames.py summary FILE     # messages, sequence range, events and blocks by type
    python frames.py classify FILE    # stores split by the resident set: hit reports, new, duplicates
    python frames.py groups FILE      # per KV cache group: kinds, hashes per store, removals

Needs only the standard library (msgspec for `summary` and `classify`, which both venvs have).
"""

from __future__ import annotations

import gzip
import struct
import sys
from collections import Counter
from collections.abc import Iterator

MAGIC = b"KVSET-ZMQ-FRAMES v1\n"


class Writer:
    def __init__(self, path):
        self.f = gzip.open(path, "wb", compresslevel=1)  # noqa: SIM115 (closed by close())
        self.f.write(MAGIC)

    def write(self, t: float, frames: list[bytes]) -> None:
        parts = [struct.pack(">dI", t, len(frames))]
        for fr in frames:
            parts.append(struct.pack(">I", len(fr)))
            parts.append(fr)
        self.f.write(b"".join(parts))

    def close(self) -> None:
        self.f.close()


def read(path) -> Iterator[tuple[float, list[bytes]]]:
    """(receive time, frames) per recorded message."""
    with gzip.open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError(f"{path}: not a {MAGIC.strip().decode()} file")
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise ValueError(f"{path}: cut short")
            t, n = struct.unpack(">dI", head)
            frames = []
            for _ in range(n):
                (length,) = struct.unpack(">I", f.read(4))
                frames.append(f.read(length))
            yield t, frames


def summary(path) -> dict:
    import msgspec

    dec = msgspec.msgpack.Decoder()
    kinds: Counter = Counter()
    blocks: Counter = Counter()
    first = last = None
    gaps = 0
    n = 0
    t0 = t1 = None
    for t, frames in read(path):
        n += 1
        t0 = t if t0 is None else t0
        t1 = t
        seq = int.from_bytes(frames[1], "big")
        if last is not None and seq != last + 1:
            gaps += 1
        first = seq if first is None else first
        last = seq
        _ts, events, _rank = dec.decode(frames[2])
        for ev in events:
            kind = ev.get("type") if isinstance(ev, dict) else ev[0]
            kinds[kind] += 1
            if isinstance(ev, dict):
                blocks[kind] += len(ev.get("block_hashes") or ())
    return {
        "messages": n,
        "first_seq": first,
        "last_seq": last,
        "gaps": gaps,
        "seconds": None if t0 is None else round(t1 - t0, 3),
        "events": dict(kinds),
        "blocks": dict(blocks),
    }


def classify(path) -> dict:
    """Replays the resident set (stored minus removed hashes) and splits the BlockStored events.

    hit_report: parent null and every block already resident (vLLM's full-mode re-emission of a
    lookup's hits); chained_after_report: of those, how many are followed in the same batch by a
    store whose parent is the report's last hash (the lookup was admitted); new: no block resident;
    duplicate: some but not all resident, or a resident chain with a parent (a recomputed block).
    """
    import msgspec

    dec = msgspec.msgpack.Decoder()
    resident: set = set()
    c: Counter = Counter()
    for _t, frames in read(path):
        _ts, events, _rank = dec.decode(frames[2])
        for i, ev in enumerate(events):
            kind = ev.get("type")
            hashes = ev.get("block_hashes") or []
            if kind == "BlockRemoved":
                c["removed_blocks"] += len(hashes)
                c["removed_not_resident"] += sum(h not in resident for h in hashes)
                resident.difference_update(hashes)
            elif kind == "BlockStored":
                here = [h in resident for h in hashes]
                if hashes and all(here) and ev.get("parent_block_hash") is None:
                    c["hit_report_events"] += 1
                    c["hit_report_blocks"] += len(hashes)
                    last = hashes[-1]
                    if any(
                        e.get("type") == "BlockStored" and e.get("parent_block_hash") == last
                        for e in events[i + 1 :]
                    ):
                        c["hit_reports_chained_in_batch"] += 1
                elif any(here):
                    c["duplicate_events"] += 1
                    c["duplicate_blocks"] += sum(here)
                else:
                    c["new_events"] += 1
                    c["new_blocks"] += len(hashes)
                resident.update(hashes)
            elif kind == "AllBlocksCleared":
                c["all_blocks_cleared"] += 1
                resident.clear()
    c["resident_at_end"] = len(resident)
    return dict(c)


def groups(path) -> dict:
    """Per KV cache group (group_idx): what its BlockStored and BlockRemoved events carry.

    For a hybrid run: the kinds a group's stores name, hashes per store, token ids per stored hash
    (a Mamba group in align mode stores the state of a range's last block only, but its token_ids
    cover the whole range), lookups' hit reports (parent null, every hash resident), and how many of
    the group's stored hashes the group 0 also stored.
    """
    import msgspec

    dec = msgspec.msgpack.Decoder()
    resident: dict = {}
    stored_ever: dict = {}
    c: dict = {}
    for _t, frames in read(path):
        _ts, events, _rank = dec.decode(frames[2])
        for ev in events:
            kind = ev.get("type")
            g = ev.get("group_idx")
            hashes = ev.get("block_hashes") or []
            s = c.setdefault(g, Counter())
            res = resident.setdefault(g, set())
            if kind == "BlockRemoved":
                s["removed_events"] += 1
                s["removed_blocks"] += len(hashes)
                s["removed_not_resident"] += sum(h not in res for h in hashes)
                res.difference_update(hashes)
            elif kind == "BlockStored":
                s["stored_events"] += 1
                s["stored_blocks"] += len(hashes)
                s[f"kind {ev.get('kv_cache_spec_kind')}"] += 1
                s[f"hashes per store {min(len(hashes), 3)}{'+' if len(hashes) >= 3 else ''}"] += 1
                tokens = len(ev.get("token_ids") or ())
                s["token_ids"] += tokens
                if hashes and tokens != len(hashes) * (ev.get("block_size") or 0):
                    s["stores_with_tokens_not_hashes_x_block_size"] += 1
                if (ev.get("block_size") or 0) < 16:
                    s["stores_block_size_under_16"] += 1
                if hashes and ev.get("parent_block_hash") is None and all(h in res for h in hashes):
                    s["hit_report_events"] += 1
                    s["hit_report_blocks"] += len(hashes)
                res.update(hashes)
                stored_ever.setdefault(g, set()).update(hashes)
    out = {}
    for g, s in sorted(c.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        s["resident_at_end"] = len(resident[g])
        s["distinct_stored"] = len(stored_ever.get(g, ()))
        if g not in (0, None):
            s["distinct_stored_also_in_group_0"] = len(stored_ever.get(g, set()) & stored_ever.get(0, set()))
        out[str(g)] = dict(s)
    return out


if __name__ == "__main__":
    import json

    commands = {"summary": summary, "classify": classify, "groups": groups}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit("usage: python frames.py summary|classify|groups FILE.zmqframes.gz")
    print(json.dumps(commands[sys.argv[1]](sys.argv[2]), indent=1))
