"""Benchmarks of kvset's exact analyzer: `make bench` runs `python -m benchmarks`."""
