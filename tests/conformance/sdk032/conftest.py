"""The conformance tests of SDK 0.32.0 (catalogue J-NN of spec sdk-0.32 §11): each runs on a
simulation of that release, seeded by the test's own name (stable)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from sim import Simulation


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    with Simulation(seed=zlib.crc32(request.node.name.encode()), sdk="0.32.0") as simulation:
        yield simulation
