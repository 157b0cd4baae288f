"""Trace file formats: bytes -> requests -> block keys (numpy uint64 batches)."""
