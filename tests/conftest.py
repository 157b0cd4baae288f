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


def pytest_collection_modifyitems(config, items):
    # the end-to-end group: `pytest -m "not slow"` for a quick round, make test runs both side by side
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.slow)
