"""The port's retry jitter, carried to the real side: every fraction the Python run drew for a
schedule callback's retry backoff, with the instant and the agent that drew it.

The port draws its full-jitter backoff (`jitter_backoff_ms` in `agents_core/options.py`:
`int(random() * min(2**attempt * base, max))` ms before attempt `attempt + 1`) from the host's
seeded `entropy.random()`, the simulation's `runtime` stream; the SDK draws the same formula
(`jitterBackoff` in `agents/dist/retries.js`) from `Math.random`. The trace shows no draw, only
its effect (the `schedule:retry` record a backoff later), so the run's `runtime` stream is
watched while the scenario runs: each draw becomes `{t, agent, fraction}` in draw order, and the
plan hands that list to the step runner, whose `Math.random` gives the SDK's retry path those
fractions in the same order (`differential/src/jitter.ts`). Nothing else in the port reads the
`runtime` stream, so these are exactly the retry draws.
"""

from __future__ import annotations

from typing import Any

from sim import Simulation

__all__ = ["RUNTIME_STREAM", "record_draws"]

RUNTIME_STREAM = "runtime"
"""The seeded stream `sim/host.py`'s `entropy.random()` reads (the schedule retry jitter)."""


class _WatchedStream:
    """The `runtime` stream, noting each fraction it hands out (a proxy: the stream itself, and
    so the seeded sequence, is unchanged)."""

    def __init__(self, stream: Any, sim: Simulation, draws: list[dict[str, Any]]) -> None:
        self._stream = stream
        self._sim = sim
        self._draws = draws

    def random(self) -> float:
        fraction = self._stream.random()
        task = self._sim.platform.kernel.current_task
        owner = getattr(task, "owner", None)
        record = getattr(owner, "record", None)
        path = str(getattr(record, "path", "?"))
        self._draws.append({"t": self._sim.now_ms, "agent": _alias(path), "fraction": fraction})
        return fraction

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _WatchedSeeds:
    """The platform's seeds, with the `runtime` stream watched; every other stream is the
    platform's own object (the evictions, ids and faults it draws do not move)."""

    def __init__(self, seeds: Any, sim: Simulation, draws: list[dict[str, Any]]) -> None:
        self._seeds = seeds
        self._runtime = _WatchedStream(seeds.stream(RUNTIME_STREAM), sim, draws)

    def stream(self, name: str) -> Any:
        return self._runtime if name == RUNTIME_STREAM else self._seeds.stream(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._seeds, name)


def _alias(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[1::2]) if len(parts) >= 2 else path


def record_draws(sim: Simulation) -> list[dict[str, Any]]:
    """Watch `sim`'s `runtime` stream from now on; the list fills with `{t, agent, fraction}`
    as the run draws (call before the first step)."""
    draws: list[dict[str, Any]] = []
    sim.platform.seeds = _WatchedSeeds(sim.platform.seeds, sim, draws)  # type: ignore[assignment]
    return draws
