"""The analysis core: the stack-distance kernel, the incremental analyzer, hit-rate curves and the
naive reference simulation. Depends only on the contract types below it."""
