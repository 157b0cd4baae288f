import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.paths import FIXTURES

settings.register_profile(
    "default",
    max_examples=int(os.environ.get("KVSET_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("default")


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
