"""Sources of block accesses: each yields batches and its own health, from a worker thread."""
