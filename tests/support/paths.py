"""Where the tests find the repository and its fixtures, whatever folder a test lives in."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MOONCAKE_TRACE = FIXTURES / "traces" / "mooncake_fast25_synthetic_trace.jsonl"
