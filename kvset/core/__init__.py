"""The analysis core: the stack-distance kernel, the incremental analyzer, hit-rate curves and the
naive reference simulation. Depends only on the contract types below it."""

from kvset.core.jit_cache import drop_stale_caches

# The analysis' numbers that the command line offers and the figures' option texts state: here, not
# beside the numpy code that uses them, so that building a parser (`--help`) loads no numpy.
DEFAULT_HORIZON = 1 << 22  # 4,194,304 blocks; memory grows with the blocks actually tracked
# A live monitor's (kvset-top, kvset serve): the engine model's reach (kvset.engine_model.records
# MODEL_HORIZON), several times one engine's pool, 8 M tokens of 16-token blocks; its tables are
# allocated once at start (about 50 MiB), so no growth stalls the stream.
LIVE_HORIZON = 1 << 19
ORDERS = ("forward", "reverse")
# The knee: past it, doubling the capacity gains less than this much hit rate (1 percentage point).
KNEE_MIN_GAIN = 0.01
# A sampled curve's error bounds are this many standard errors: about 95 % under the normal
# approximation.
ERROR_Z = 2.0

drop_stale_caches()  # before any compiled module loads its cache (see kvset.core.jit_cache)
