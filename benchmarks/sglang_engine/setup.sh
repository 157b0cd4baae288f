#!/usr/bin/env bash
# Creates the SGLang venv for the validation harness: sglang 0.5.23 with its own dependency list (it
# installs and imports without a GPU: the harness uses its radix cache, paged allocator and event
# publisher on CPU tensors; the page-hash extension compiles on first use, with g++ and libssl).
# Usage: benchmarks/sglang_engine/setup.sh   (SGLANG_VENV=path to put the venv elsewhere; PYTHON=python3.11)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="${SGLANG_VENV:-$REPO/.venv-sglang}"
PYTHON="${PYTHON:-python3.11}"
STAMP="$VENV/.installed-stamp"
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$HERE/setup.sh" ]; then
    exit 0
fi
echo "setup.sh: creating $VENV (sglang 0.5.23 and its dependencies; several minutes, about 10 GB)" >&2
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "sglang==0.5.23"
"$VENV/bin/python" - <<'PY'
import sglang
from sglang.srt.disaggregation.kv_events import ZmqEventPublisher  # noqa: F401
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator  # noqa: F401
from sglang.srt.mem_cache.radix_cache import RadixCache  # noqa: F401
assert sglang.__version__ == "0.5.23", sglang.__version__
PY
touch "$STAMP"
