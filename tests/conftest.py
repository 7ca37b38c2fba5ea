"""Shared fixtures: the tests directory on sys.path (naive references, Hypothesis
instance strategies), Hypothesis profiles, the backends under test, an ``rng``."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile("thorough", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def available_backends() -> list[str]:
    """Backends to test: ``RAD_TEST_BACKENDS`` (comma list) or every available one."""
    import rad
    from rad._backends import ORDER

    wanted = os.environ.get("RAD_TEST_BACKENDS")
    names = [b.strip() for b in wanted.split(",")] if wanted else list(ORDER)
    info = rad.backends()
    return [b for b in names if info[b]["available"]]


BACKENDS = available_backends()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20231125)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (long statistical or scale runs) need ``--slow``."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
