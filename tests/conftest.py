import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MOONCAKE_TRACE = FIXTURES / "traces" / "mooncake_fast25_synthetic_trace.jsonl"

settings.register_profile(
    "default", max_examples=int(os.environ.get("KVSET_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
