"""Running a test on each SDK release the runtime models, and reading what differs between them.

`on_both_releases` parametrizes a test's `sim` fixture (tests/conftest.py) over every release;
a test so marked pins behaviour that `docs/divergences.md` says holds on both. `on_release(NAME)`
runs a test on that release alone: a test that pins what 0.21.0 did where 0.32.0 changed it
(spec sdk-0.32 says what changed) runs on 0.21.0 whatever the default is. The helpers
below read the stored schedules and name their statements whichever release the simulation
runs: 0.21.0 keeps them in `cf_agents_schedules`, 0.32.0 as scheduler jobs in
`cf_agents_jobs` (spec sdk-0.32 §3.1).
"""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.releases.registry import RELEASES, release_named
from sim import AgentRef, Simulation

__all__ = [
    "RELEASE_NAMES",
    "alarm_computation",
    "on_both_releases",
    "on_release",
    "schedule_insert",
    "schedule_read",
    "schedule_table",
    "stored_schedules",
]

RELEASE_NAMES: tuple[str, ...] = tuple(RELEASES)
"""Every release the runtime models, oldest first."""

on_both_releases = pytest.mark.parametrize("sim", RELEASE_NAMES, indirect=True)
"""Run the test once per release (its `sim` fixture runs that release)."""


def on_release(name: str) -> pytest.MarkDecorator:
    """Run the test on release `name` only (its `sim` fixture runs that release), for behaviour
    the other releases changed; an unknown name is refused with those modelled."""
    return pytest.mark.parametrize("sim", [release_named(name).name], indirect=True)


def alarm_computation(sim: Simulation) -> str:
    """A `match` for `arm_storage_fault`: the first read of the alarm's computation, which a
    schedule, a keepAlive lease or a released one runs again (0.21.0's `_scheduleNextAlarm`
    reads the key-value store first, 0.32.0's `rearmAlarm` the job queue's exclusive jobs)."""
    if sim.platform.release == "0.21.0":
        return r"^SELECT value FROM _cf_KV\b"
    return r"^SELECT MIN\(time\) AS t FROM cf_agents_jobs\b"


def schedule_table(sim: Simulation) -> str:
    """The table the release of `sim` stores schedules in."""
    return "cf_agents_schedules" if sim.platform.release == "0.21.0" else "cf_agents_jobs"


def schedule_read(sim: Simulation) -> str:
    """A `match` for `arm_storage_fault`: a read of the stored schedules."""
    return rf"^SELECT\b.* FROM {schedule_table(sim)}\b"


def schedule_insert(sim: Simulation) -> str:
    """A `match` for `arm_storage_fault`: a write of a new schedule row."""
    return rf"^INSERT\b.* INTO {schedule_table(sim)}\b"


def stored_schedules(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    """The schedules `ref` stores, each with its `id` and `callback` (on 0.32.0 the scheduler's
    jobs, not its host jobs)."""
    if sim.platform.release == "0.21.0":
        return sim.query(ref, "SELECT id, callback FROM cf_agents_schedules")
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cf_agents_jobs'"
    if not sim.query(ref, exists):
        return []  # 0.32.0 creates the table with its first queue statement
    return sim.query(
        ref, "SELECT id, fn AS callback FROM cf_agents_jobs WHERE capability = 'scheduler'"
    )
