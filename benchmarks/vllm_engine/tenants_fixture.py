"""Record the small multi-tenant fixture of tests/fixtures/vllm_kv_events (engine venv):

    .venv-vllm/bin/python benchmarks/vllm_engine/tenants_fixture.py OUT_DIR

vLLM 0.33.0's real scheduler and ZmqEventPublisher (engine_driver.py --tenants, full report mode,
unpaced) on 127.0.0.1, every message recorded off a SUB (run.py's Recorder), and the engine's own
per-request record (--study: each request's cache_salt, session_id and the key of its prompt's last
full block) beside it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402

TENANTS = "acme:2:16,globex:1:8,flood:1:8:flood"
POOL = 600


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    events, replay = run.free_port(), run.free_port()
    study = out / "vllm0330_tenants_study.json"
    cmd = [sys.executable, str(HERE / "engine_driver.py"), "--pool-blocks", str(POOL), "--tenants", TENANTS]
    cmd += ["--events-port", str(events), "--replay-port", str(replay), "--subscribers", "1"]
    cmd += ["--study", str(study)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=run.engine_env())
    run.read_json_line(child, "ready", timeout=600)
    rec = run.Recorder(f"tcp://127.0.0.1:{events}", out / "vllm0330_tenants_full.zmqframes.gz")
    rec.start()
    run.read_json_line(child, "subscribed", timeout=120)
    done = run.read_json_line(child, "done", timeout=600)
    rec.finish(done["batches_published"] - 1, timeout=60)
    child.wait()
    requests = json.loads(study.read_text())["requests"]
    keep = ("cache_salt", "session_id", "prompt_last_hash")
    truth = {
        "tenants": done["tenants"],
        "requests": {rid: {k: r.get(k) for k in keep} for rid, r in requests.items() if "cache_salt" in r},
    }
    (out / "vllm0330_tenants_truth.json").write_text(json.dumps(truth, indent=1))
    study.unlink()
    print(json.dumps(rec.stats()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
