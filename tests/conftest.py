"""Shared fixtures: a fresh simulation per test, seeded by the test's own name (stable).

The simulation runs the default release unless the test is parametrized over `sim` indirectly
(`tests.releases.on_both_releases`, `on_release("0.21.0")`): then it runs the release named by
the parameter, with the seed the test would have without that parameter, so both releases play
the same draws.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from sim import Simulation


def _seed_name(request: pytest.FixtureRequest, release: str | None) -> str:
    """The test's node name without the release's id, which the parametrization added."""
    name: str = request.node.name
    if release is None or "[" not in name:
        return name
    base, _, ids = name.partition("[")
    rest = [part for part in ids.removesuffix("]").split("-") if part != release]
    return f"{base}[{'-'.join(rest)}]" if rest else base


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    release: str | None = getattr(request, "param", None)
    seed = zlib.crc32(_seed_name(request, release).encode())
    with Simulation(seed=seed, sdk=release) as simulation:
        yield simulation
