"""One widget per module; each renders part of a snapshot and nothing else."""
