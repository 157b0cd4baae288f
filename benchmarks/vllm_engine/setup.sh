#!/usr/bin/env bash
# Creates the engine venv for the vLLM validation harness and installs exactly the pinned versions:
# torch 2.13.0 (the CPU wheel where one lies on disk, e.g. PIP_FIND_LINKS=/opt/wheels; else the
# registry's build), vllm 0.33.0 without its dependency list (most of it is GPU kernels the
# harness never imports), then requirements-engine.txt, every package pinned, --no-deps.
# Usage: benchmarks/vllm_engine/setup.sh   (VLLM_VENV=path to put the venv elsewhere; PYTHON=python3.11)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="${VLLM_VENV:-$REPO/.venv-vllm}"
PYTHON="${PYTHON:-python3.11}"
STAMP="$VENV/.installed-stamp"
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$HERE/requirements-engine.txt" ] && [ "$STAMP" -nt "$HERE/setup.sh" ]; then
    exit 0
fi
echo "setup.sh: creating $VENV (torch 2.13.0, vllm 0.33.0 and their pinned imports; a few minutes)" >&2
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" --no-deps "vllm==0.33.0"
"${PIP[@]}" --no-deps -r "$HERE/requirements-engine.txt"
# what the harness imports, and the tokenizer it needs, offline
HF_HUB_OFFLINE=1 "$VENV/bin/python" - <<'PY'
import sys
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else ".")
import vllm, torch
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: F401
from vllm.v1.metrics.loggers import PrometheusStatLogger  # noqa: F401
from vllm.distributed.kv_events import ZmqEventPublisher  # noqa: F401
assert vllm.__version__ == "0.33.0", vllm.__version__
print(f"setup.sh: vllm {vllm.__version__}, torch {torch.__version__}", file=sys.stderr)
PY
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c "import sys; sys.path.insert(0, '$HERE'); import workload; workload.load_tokenizer()"
touch "$STAMP"
