"""What the KV-events source tells its user: the notes and details of its health, in words."""

from __future__ import annotations

from kvset.engine.kv_event_readings import HITS_MIN_SHARE, HITS_MIN_STORES
from kvset.engine.kv_event_sequence import UNANSWERED_PAUSE_S
from kvset.engine.kv_event_tracker import KvEventTracker
from kvset.engine.resident_set import MAX_RESIDENT
from kvset.engine.stream_shape import ONE_EVENT_PER_PAGE, RADIX_INSERTS
from kvset.engine.tracker_output import HealthParts
from kvset.quantities import plural
from kvset.types import PAST_NAME_CAP

HITS_REPORTED_NOTE = (
    "hits reported: the curve is the exact LRU curve of the accesses seen (each request once; lookups of "
    "waiting requests, reported again every step, counted once); the engine's own hit rate is predicted by "
    "a model of its block pool, shown with its inputs"
)
MISSES_ONLY_NOTE = (
    "engine reports misses only (stored blocks are not already resident, or too rarely to tell): the "
    "curve is the LRU curve of the engine's misses, its hits are invisible. Fix: vLLM >= 0.26, send "
    'requests with vllm_xargs: {"kv_cache_report_mode": "full"}'
)
RECONSTRUCTED_NOTE = (
    "engine reports misses only (vLLM's default report mode): each request's hits are read off the "
    "chain its first stored block hangs on, among the blocks known to be resident, so the curve is of "
    "all accesses, hits reconstructed; a request that stored no block is not seen (the operating point "
    "says what share /metrics counted that the events did not show). The curve of the misses alone is "
    "what a second cache tier behind the engine would see"
)
EVENTS_HELP = (
    "KV events (--events): the blocks an engine request stores (and, when it reports hits, the blocks its "
    "lookup found) are that request's accesses, handed on as one request when it finishes. "
    "Engines publish stores of newly computed blocks only by default, i.e. their misses: hits are "
    "invisible, and the curve is then the LRU curve of the engine's misses (roughly what a second "
    "cache tier behind the engine would see), not of all its accesses. vLLM >= 0.26 also publishes "
    'the hit blocks of requests sent with vllm_xargs: {"kv_cache_report_mode": "full"}; then the '
    "curve is the exact LRU curve of the engine's accesses. Without them, each request's hits are read "
    "off the chain its first stored block hangs on (its parent: the last block it found cached), walked "
    "among the resident blocks: the curve of all accesses, reconstructed, labelled so. "
    "The status line says which case is seen "
    f"(at least {HITS_MIN_STORES} stores of blocks that are already resident, and at least "
    f"{HITS_MIN_SHARE:.0%} of all stores, mean hits are reported). BlockRemoved events give the engine's "
    "own resident blocks, evictions and re-stores after removal (misses a larger cache would have hit). "
    "Hybrid models publish one copy of each block per KV cache group: one group is counted (--group-idx, "
    "else the full-attention group when the events say which it is, else the first group seen)."
)


PER_PAGE_NOTE = (
    "stream of one event per page: every stored page is an access ({pages}), grouped into requests by "
    "their parent chain, and the curve is of {scope}; vLLM's request grouping and block-pool model are "
    "built for its request steps and do not apply, so no engine model is predicted"
)
RADIX_NOTE = (
    "SGLang's radix inserts (signed hashes, no hit reports): each request's cached prefix is read off the "
    "parent chain of the pages it stores ({prefix} pages so far), so the curve is of all its accesses; "
    "the engine model replays SGLang's radix cache with its default policy, lru"
)


def kv_event_health(tracker: KvEventTracker, at: float) -> HealthParts:
    """The notes and details of the source's health; `at` (wall seconds) samples the eviction rate."""
    stored = tracker.counted_total(lambda b: b.stored_total)
    shapes = {p.shape.decided for p in tracker.publishers}
    radix = RADIX_INSERTS in shapes
    # SGLang's hits are in the accesses, read off the parent chains
    hits_reported = tracker.hits_reported or radix
    group_facts = _group_facts(tracker)
    sequences = [p.sequence for p in tracker.publishers]
    lost = sum(s.lost for s in sequences)

    counts = tracker.request_counts()
    reconstructed = (
        not hits_reported
        and counts.get("reconstructed", 0) > 0
        and counts.get("reconstructed", 0) >= counts.get("unknown_prefix", 0)
    )
    notes: list[str] = []
    if radix:
        prefix = sum(p.radix.counts.prefix_pages for p in tracker.publishers)
        notes.append(RADIX_NOTE.format(prefix=f"{prefix:,}"))
    elif ONE_EVENT_PER_PAGE in shapes:
        pages = sum(p.pages.counts.pages for p in tracker.publishers)
        scope = "all its accesses" if hits_reported else "the engine's misses (no hit reports)"
        notes.append(PER_PAGE_NOTE.format(pages=plural(pages, "page"), scope=scope))
    elif hits_reported:
        notes.append(HITS_REPORTED_NOTE)
    elif reconstructed:
        notes.append(RECONSTRUCTED_NOTE)
    elif stored:
        notes.append(MISSES_ONLY_NOTE)
    if lost:
        why = "" if any(s.can_replay for s in sequences) else "; give --replay-endpoint to recover gaps"
        notes.append(
            f"{plural(lost, 'event batch', 'event batches')} lost in sequence gaps: their accesses are "
            f"missing from the curve{why}"
        )
    refused = sum(s.refused for s in sequences)
    if refused:
        notes.append(
            f"{plural(refused, 'batch', 'batches')} refused for a sequence number that jumped and was not "
            "followed (a damaged or foreign frame): not analysed"
        )
    forgotten = tracker.counted_total(lambda b: b.forgotten_resident)
    if forgotten:
        notes.append(
            f"{plural(forgotten, 'resident block')} forgotten: more than {MAX_RESIDENT:,} blocks resident "
            "without a removal (BlockRemoved events lost, or not published); a later store of one is taken "
            "as new, not as a hit"
        )
    if group_facts is not None and group_facts[0]:
        notes.append(group_facts[0])
    if tracker.ignored_media and not stored:
        seen = ", ".join(f"{m} ({plural(n, 'event')})" for m, n in tracker.ignored_media.most_common())
        notes.append(f"no {tracker.medium} events yet; other media seen: {seen}; see --medium")

    details: list[tuple[str, str]] = []
    for publisher in tracker.publishers:
        label = publisher.label + ("" if publisher.rank is None else f" {publisher.address}")
        sequence = publisher.sequence
        seq = "-" if sequence.last_seq is None else str(sequence.last_seq)
        resident = tracker.counted_total(len, [publisher])
        evictions = tracker.counted_total(lambda b: b.evictions_total, [publisher])
        suspect = sequence.suspect_seq
        details.append(
            (
                label,
                f"{plural(publisher.batches, 'batch', 'batches')}, {plural(publisher.accesses, 'access', 'accesses')}, "
                f"{plural(resident, 'resident block')}, {plural(evictions, 'eviction')}, last seq {seq}"
                + ("" if not sequence.first_seq else f" (joined at seq {sequence.first_seq})")
                + ("" if suspect is None else f"; seq {suspect} held until the next batch confirms it"),
            )
        )
    pending = sum(s.being_replayed for s in sequences)
    pauses = sum(s.pauses for s in sequences)
    shed = sum(s.shed for s in sequences)
    # the stated wait: the longest the figures stand still for a gap (--replay-timeout)
    wait = max((s.replay_timeout for s in sequences if s.can_replay), default=None)
    details.append(
        (
            "sequence gaps",
            f"{plural(sum(s.gaps for s in sequences), 'gap')}, "
            f"{plural(sum(s.missing for s in sequences), 'batch', 'batches')} missing: "
            f"{sum(s.recovered for s in sequences)} recovered by replay, {lost} lost"
            + (f", {pending} being replayed" if pending else "")
            + (f"; {refused} refused (implausible sequence number)" if refused else "")
            + (f"; {shed} shed by kvset to keep up (not gaps: not asked again)" if shed else "")
            + (
                f"; replays paused {plural(pauses, 'time')} for {UNANSWERED_PAUSE_S:g} s (the replay "
                "endpoint did not answer): gaps meanwhile counted lost at once"
                if pauses
                else ""
            ),
        )
    )
    if wait is not None:
        details.append(("replay wait", f"a gap waits at most {wait:g} s for its replay, then counts lost"))
    details.append(("quiet wait", _quiet_wait(tracker)))
    probes = sum(s.tail_probes for s in sequences)
    if probes:
        details.append(("quiet stream", f"asked {probes} times for batches after the last one seen"))
    details.append(("evictions", f"{tracker.evictions_total} total, {tracker.eviction_rate(at):.1f}/s"))
    details.append(
        ("re-stores after removal", str(tracker.counted_total(lambda b: b.restores_after_removal)))
    )
    details.append(("hit reporting", _hit_reporting(tracker)))
    details.append(("stream shape", _shapes(tracker)))
    details.append(("requests", _requests(counts)))
    unsure = tracker.counted_total(lambda b: b.stores_of_uncertain)
    if unsure:
        details.append(
            (
                "stores after lost events",
                f"{plural(unsure, 'store')} of blocks whose eviction may have been lost: not taken as hits",
            )
        )
    if tracker.principals.active:  # the events name tenants, sessions or adapters (--by)
        named = tracker.principals
        names = named.names
        past = (
            f"; the table is full ({names.cap:,} names): {plural(names.past_cap, 'lookup')} of names "
            f"past it, counted together as {PAST_NAME_CAP}"
            if names.past_cap
            else ""
        )
        details.append(("principals", f"{plural(names.held, 'name')} off the events{past}"))
    ignored = ", ".join(f"{m} {plural(n, 'event')}" for m, n in tracker.ignored_media.most_common())
    details.append(("medium", (tracker.medium or "all") + (f"; ignored: {ignored}" if ignored else "")))
    if group_facts is not None:
        details.append(("KV cache group", group_facts[1]))
    if tracker.block_size is not None:
        details.append(("block size", f"{tracker.block_size} tokens"))
    restarts = sum(s.restarts for s in sequences)
    if restarts or tracker.clears:
        details.append(("resets", f"{restarts} engine restarts, {tracker.clears} AllBlocksCleared"))
    # Whether hits are reported is a question only once something was stored: before the first
    # event the curve is not "of the engine's misses", it is of nothing yet.
    return HealthParts(
        notes=tuple(notes),
        details=tuple(details),
        reports_hits=hits_reported if stored else None,
        hits_reconstructed=reconstructed,
        counts=(("batches_lost", lost), ("sequence_gaps", sum(s.gaps for s in sequences))),
    )


def _group_facts(tracker: KvEventTracker) -> tuple[str, str] | None:
    """(note, detail) about KV cache groups, when there is more than one to choose from."""
    in_use = tracker.groups.in_use
    chosen = tracker.groups.given is not None
    if in_use is None or (not chosen and len(tracker.groups.seen) < 2):
        return None
    others = sorted(tracker.groups.seen - {in_use})
    of = ("group " if len(others) == 1 else "groups ") + ", ".join(map(str, others))
    why = "--group-idx" if chosen else tracker.groups.kinds.get(in_use) or "first seen"
    detail = f"{in_use} ({why})"
    if others:
        detail += f"; ignored: {plural(tracker.groups.ignored_events, 'event')}, {plural(tracker.groups.ignored_blocks, 'stored block')} of {of}"
    note = ""
    if not chosen:
        note = (
            f"several KV cache groups (a hybrid model): the curve is group {in_use}'s, each group has its "
            f"own (kv_cache_groups), and the engine model replays all of them in the one pool they share "
            f"({tracker.groups.ignored_blocks} stored blocks of {of} outside the curve); --group-idx counts one alone"
        )
    return note, detail


def _shapes(tracker: KvEventTracker) -> str:
    """Each publisher's stream shape; one line when they agree."""
    said = [p.shape.describe(tracker.hits_reported) for p in tracker.publishers]
    if len(set(said)) == 1:
        return said[0]
    return "; ".join(f"{p.label}: {text}" for p, text in zip(tracker.publishers, said, strict=True))


def _hit_reporting(tracker: KvEventTracker) -> str:
    resident, stored = tracker.hit_evidence()
    if tracker.hits_reported:
        return f"hits reported ({resident} stores of resident blocks of {stored} stores)"
    if resident:
        of = f" of {stored} stores" if resident >= HITS_MIN_STORES else ""
        return f"misses only so far ({resident} stores of resident blocks{of}: too few to tell)"
    return "misses only so far" if stored else "unknown (no stores yet)"


def _requests(c: dict[str, int]) -> str:
    """The grouping into requests and the dedupe of hit reports, in words."""
    text = f"{c.get('requests', 0)} finished"
    if c.get("reports"):
        text += (
            f"; {c['reports']} hit reports: {c.get('admitted', 0)} admitted, {c.get('not_admitted', 0)} re-reports "
            f"of waiting requests dropped ({c.get('not_admitted_blocks', 0)} blocks), "
            f"{c.get('admitted_without_store', 0)} admitted without storing a block"
        )
    extra = [
        f"{c[k]} {name}"
        for k, name in (
            ("readmissions", "readmissions after preemption"),
            ("decode_blocks", "output blocks"),
            ("reconstructed", "with hits read off the resident chain"),
            ("unknown_prefix", "without a known cached prefix"),
            ("prefix_pages", "cached pages read off parent chains"),
            ("output_pages", "output pages"),
            ("finished_by_time", "finished unseen (no output store)"),
        )
        if c.get(k)
    ]
    return text + ("; " + ", ".join(extra) if extra else "")


def _quiet_wait(tracker: KvEventTracker) -> str:
    """The wait at a stream's end: its last requests count once the publisher is silent this long."""
    wait = max(tracker.quiet_wait(p) for p in tracker.publishers)
    said = f"a publisher's last requests count once it is silent {wait:.3g} s"
    if wait >= tracker.quiet_seconds:
        return said
    return (
        f"{said} (its {tracker.block_size} longest steps lately: no request runs that long without "
        f"storing a block; at most {tracker.quiet_seconds:g} s)"
    )
