"""The layout of the exact kernel's state arrays: what each cell of `meta` and `counts` holds, why
feed_kernel returned, and the codes it writes for misses. Shared by the kernel (kvset.core.kernel), the
slot compaction (kvset.core.slot_compaction) and the analyzer that owns the arrays."""

from __future__ import annotations

# meta[] layout (int64)
M_NOW = 0  # next free slot
M_TRACKED = 1  # live slots == tracked blocks
M_OLDEST = 2  # no live slot below this index
M_HORIZON = 3
M_EVICTED = 4  # blocks forgotten at the horizon, all time
M_GONE_FLAGS = 5  # the forgotten set: GONE_FULL, GONE_HAS_EMPTY_KEY
M_GONE_FILL = 6  # keys in the forgotten set's table
M_COMPACTIONS = 7
M_GONE_CAP = 8  # keys the forgotten set's table takes before it must grow
M_SLOT = 9  # the fine time slot accesses are counted in
M_LATE = 10  # accesses stamped before the current slot, all time
M_REASON = 11  # why feed_kernel returned
M_MAX_DISTANCE = 12  # largest stack distance seen: the exact curve's last capacity
M_RUNS = 13  # runs taken at once, all time
M_RUN_ACCESSES = 14  # accesses taken in those runs (not the two per-block ones each starts from)
M_FINE_CURRENT = 15  # the rings' newest slots (ring_kernel.NO_SLOT: none yet)
M_COARSE_CURRENT = 16
M_SLOT_START = 17  # index in the batch where the current time slot's accesses began
META_SIZE = 18

STOP_DONE = 0
STOP_GROW = 1
STOP_NEXT_SLOT = 2  # the sampled kernel's (the exact one closes its slots itself)
STOP_GROW_GONE = 3  # the forgotten set is half full: grow it (or call it full)

# counts[] layout (int64), accumulated per call
C_ACCESSES = 0
C_TOKENS = 1
C_FIRST_TIME = 2
C_BEYOND = 3
C_HITS = 4  # re-references inside the horizon
C_FIRST_TIME_TOKENS = 5
C_BEYOND_TOKENS = 6
COUNTS_SIZE = 7

# distance codes written to `out`
FIRST_TIME = 0
BEYOND_HORIZON = -1

GONE_FULL = 1  # meta[M_GONE_FLAGS] bits
GONE_HAS_EMPTY_KEY = 2

NO_SLOT = -(2**63)  # a ring row's slot id before it held a slot; a ring's current before any (int64's least)
