"""Shared fixtures: a fresh simulation per test, seeded by the test's own name (stable)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from sim import Simulation


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    with Simulation(seed=zlib.crc32(request.node.name.encode())) as simulation:
        yield simulation
