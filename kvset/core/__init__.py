"""The analysis core: the stack-distance kernel, the incremental analyzer, hit-rate curves and the
naive reference simulation. Depends only on the contract types below it."""

from kvset.core.jit_cache import drop_stale_caches

drop_stale_caches()  # before any compiled module loads its cache (see kvset.core.jit_cache)
