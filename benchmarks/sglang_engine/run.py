"""Validate kvset against SGLang 0.5.23's real radix cache: SGLang's cached tokens vs kvset's prediction.

For each pool size and eviction policy, driver.py (in the SGLang venv) drives SGLang's RadixCache,
allocator and ZmqEventPublisher on 127.0.0.1 with the agentic workload and records every frame;
predict.py (in kvset's venv) feeds the frames to kvset's KV-event tracker and engine model. The table:
SGLang's own token hit rate (cached tokens over prompt tokens) beside kvset's predicted rate at
max_total_num_tokens / page_size, and the share of the pool running requests locked.

    python run.py --sglang-python /work/venvs/sglang/bin/python --kvset-python .venv/bin/python --check
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_POOLS = "24000,32000,44000,52000,60000,72000"
DEFAULT_POLICIES = "lru,lfu,priority"
CHECK_POINTS = 2.0
REPLAYED = ("lru", "lfu")  # kvset.types.RADIX_EVICTION_POLICIES (this runs in the SGLang venv)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(args: argparse.Namespace, pool: int, policy: str) -> dict:
    out = args.out / f"pool{pool}-{policy}"
    out.mkdir(parents=True, exist_ok=True)
    frames, truth_path = out / "events.zmqframes.gz", out / "truth.json"
    if not (args.cache and truth_path.exists()):
        port = free_port()
        cmd = [args.sglang_python, str(HERE / "driver.py"), "--pool-tokens", str(pool), "--policy", policy]
        cmd += ["--requests", str(args.requests), "--seed", str(args.seed), "--port", str(port)]
        cmd += ["--out", str(frames), "--truth", str(truth_path), "--page-size", str(args.page_size)]
        cmd += ["--agents", str(args.agents), "--max-running", str(args.max_running)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    truth = json.loads(truth_path.read_text())
    pages = truth["pool_tokens"] // truth["page_size"]
    # kvset replays the policy where it can (lru, lfu), and lru's prediction otherwise
    replayed = policy if policy in REPLAYED else "lru"
    env_cmd = [args.kvset_python, str(HERE / "predict.py"), str(frames), "--pool-pages", str(pages)]
    env_cmd += ["--policy", replayed]
    kvset = json.loads(subprocess.run(env_cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout)
    return {"pool": pool, "policy": policy, "replayed": replayed, "truth": truth, "kvset": kvset}


def table(rows: list[dict]) -> str:
    lines = [
        "| pool (tokens) | policy | locked (median) | SGLang cached | kvset predicted | diff (points) "
        "| cached pages read off the chains | stored pages kept |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t, k = r["truth"], r["kvset"]
        diff = 100 * (k["predicted_hit_rate"] - t["hit_rate"])
        lines.append(
            f"| {r['pool']:,} | {r['policy']} | {t['locked_share_median']:.0%} | {t['hit_rate']:.1%} | "
            f"{k['predicted_hit_rate']:.1%} | {diff:+.1f} "
            f"| {k['counts']['prefix_pages']:,} of {t['cached_tokens'] // t['page_size']:,} "
            f"| {k['accesses'] - k['counts']['prefix_pages']:,} of {k['stored_pages']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglang-python", default=str(REPO / ".venv-sglang/bin/python"))
    ap.add_argument("--kvset-python", default=str(REPO / ".venv/bin/python"))
    ap.add_argument("--pools", default=DEFAULT_POOLS)
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--agents", type=int, default=24)
    ap.add_argument("--max-running", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "out")
    ap.add_argument("--cache", action="store_true", help="reuse recorded runs of the same pool and policy")
    ap.add_argument(
        "--check", action="store_true", help=f"exit 1 when a checked run is > {CHECK_POINTS} points off"
    )
    ap.add_argument(
        "--check-policies", default="lru,lfu", help="the policies checked: those kvset replays (lru, lfu)"
    )
    args = ap.parse_args()
    rows = []
    for pool in [int(p) for p in args.pools.split(",")]:
        for policy in args.policies.split(","):
            row = run_one(args, pool, policy)
            rows.append(row)
            t, k = row["truth"], row["kvset"]
            print(
                f"pool {pool} {policy}: SGLang {t['hit_rate']:.4f} kvset {k['predicted_hit_rate']:.4f} "
                f"locked {t['locked_share_median']:.2f}",
                file=sys.stderr,
                flush=True,
            )
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    if args.check:
        checked = [r for r in rows if r["policy"] in args.check_policies.split(",")]
        worst = max(abs(r["kvset"]["predicted_hit_rate"] - r["truth"]["hit_rate"]) for r in checked)
        if 100 * worst > CHECK_POINTS:
            print(f"worst difference {100 * worst:.1f} points > {CHECK_POINTS}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
