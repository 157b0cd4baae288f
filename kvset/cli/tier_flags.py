"""What --tiers, --tier-mode and --size-next-tier ask for (the flags: kvset.cli.flags.add_tier_arguments),
checked once for `kvset analyze`, `kvset-top` and `kvset serve`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from kvset.core.tiers import tier_reaches
from kvset.quantities import parse_fractions, parse_sizes


@dataclass(frozen=True)
class TierRequest:
    sizes: tuple[int, ...]  # fastest first, in `unit`
    unit: str  # blocks | bytes
    mode: str  # exclusive | inclusive
    next_target: float | None  # --size-next-tier

    def snapshot_config(self) -> dict:
        """The SnapshotConfig fields of the request."""
        return {
            "tier_sizes": self.sizes,
            "tier_unit": self.unit,
            "tier_mode": self.mode,
            "next_tier_target": self.next_target,
        }


def tier_request_from_args(
    args: argparse.Namespace, bytes_known: bool, bytes_flags: str = "--model"
) -> TierRequest | None:
    """None without --tiers. bytes_known: `bytes_flags` give the bytes per block, so sizes may be in
    bytes. Raises ValueError with the reason."""
    if not getattr(args, "tiers", None):
        if getattr(args, "size_next_tier", None):
            raise ValueError("--size-next-tier needs --tiers: the tiers the next one goes behind")
        return None
    sizes, unit = parse_sizes(args.tiers, "tier size")
    if unit == "bytes" and not bytes_known:
        raise ValueError(
            f"--tiers {args.tiers}: sizes in bytes need the KV bytes per block; give {bytes_flags}"
        )
    tier_reaches(sizes, args.tier_mode)  # inclusive tiers must grow; bytes and blocks keep their order
    next_target = None
    if args.size_next_tier:
        targets = parse_fractions(args.size_next_tier, "--size-next-tier target")
        if len(targets) != 1:
            raise ValueError(f"--size-next-tier takes one target, got {args.size_next_tier!r}")
        next_target = targets[0]
    return TierRequest(sizes, unit, args.tier_mode, next_target)
