"""What every kvset-top test here shares: async tests on asyncio, and no colour setting from outside."""

import pytest


@pytest.fixture
def anyio_backend():
    # async tests run on anyio's pytest plugin (installed with httpx), on the asyncio backend
    return "asyncio"


@pytest.fixture(autouse=True)
def _colour_environment(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)  # a CI shell's NO_COLOR must not change what is tested
