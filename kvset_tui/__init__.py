"""kvset-top: the Textual live monitor. It renders kvset snapshots and nothing else."""
