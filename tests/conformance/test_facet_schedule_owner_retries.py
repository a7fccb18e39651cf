"""How the owner of a sub-agent schedule runs it when its root routes it down (spec sdk-0.32
§3.5, SC:415; spec fibers §4.3, §4.7 for 0.21.0).

On 0.32.0 the owner retries with the retry its root stored on the job (the root's class
defaults when the caller gave none), passes the callback the `Schedule` built from the timing
envelope, and on a one-shot's final platform failure re-raises without a word, so the root's
job driver retries the walk and keeps the job (a memory-limit reset then goes to the root's
breaker). On 0.21.0 the owner retries with its own defaults, passes the raw row, warns as it
defers, and the root reports the walk's failure (`attempts: 0`) and leaves the row due.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sim import AgentRef, Simulation
from tests.conformance.sub_agent_fixtures import CHILD_HEARTBEAT_MS, Node, Root, journal
from tests.conformance.test_sub_agents import events, fire_next_alarm

on_0_32 = pytest.mark.parametrize("sim", ["0.32.0"], indirect=True)
on_0_21 = pytest.mark.parametrize("sim", ["0.21.0"], indirect=True)

MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."
CONNECTION_LOST = "Network connection lost."
CODE_UPDATE = "Durable Object reset because its code was updated."
ROOT_RETRY = {"maxAttempts": 3, "baseDelayMs": 100, "maxDelayMs": 3000}
"""The root's class defaults (the SDK's), which 0.32.0 stores on every schedule job."""


class Owner(Node):
    """A sub-agent whose own retry defaults (two attempts) differ from its root's (three)."""

    options = {
        "keep_alive_interval_ms": CHILD_HEARTBEAT_MS,
        "retry": {"max_attempts": 2, "base_delay_ms": 50, "max_delay_ms": 200},
    }

    async def fail(self, payload: Any = None, schedule: Any = None) -> None:
        self._note("fail", {"schedule": schedule})
        raise RuntimeError(payload["error"])


def start(sim: Simulation) -> tuple[AgentRef, AgentRef]:
    root = sim.agent(Root, "root")
    sim.run_for(10_000)
    return root, sim.facet(root, Owner, "o")


def attempts(sim: Simulation, owner: AgentRef) -> list[Any]:
    """The second argument of each call of the owner's callback, oldest first."""
    return [row["data"]["schedule"] for row in journal(sim, owner, "fail")]


def warnings(sim: Simulation, ref: AgentRef) -> list[str]:
    return [str(r.fields["message"]) for r in sim.trace.select("console:warn", agent=ref.path)]


def root_job(sim: Simulation, root: AgentRef, id: str) -> dict[str, Any] | None:
    rows = sim.query(root, "SELECT * FROM cf_agents_jobs WHERE id = ?", id)
    return rows[0] if rows else None


def alarm_endings(sim: Simulation, root: AgentRef) -> list[str]:
    ends = ("alarm:done", "alarm:failed", "alarm:interrupted")
    return [r.event for r in sim.trace.records if r.agent == root.path and r.event in ends]


# -- 0.32.0 ---------------------------------------------------------------------------------
@on_0_32
def test_J058_the_owner_retries_with_the_retry_stored_on_the_job(sim: Simulation) -> None:
    """The job stores the root's resolved retry; the owner resolves that over its own defaults,
    so it makes the root's three attempts, not its own two, then reports the failure itself
    and the one-shot is deleted."""
    root, owner = start(sim)
    created = sim.call(root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": "boom"})
    job = root_job(sim, root, created.id)
    assert job is not None and json.loads(job["retry_options"]) == ROOT_RETRY
    fire_next_alarm(sim)
    assert len(attempts(sim, owner)) == 3
    retries = events(sim, owner, "schedule:retry")
    assert [(e["attempt"], e["maxAttempts"]) for e in retries] == [(2, 3), (3, 3)]
    assert events(sim, owner, "schedule:error") == [
        {"callback": "fail", "id": created.id, "error": "boom", "attempts": 3}
    ]
    assert events(sim, root, "schedule:error") == []
    assert events(sim, root, "schedule:retry") == []
    assert root_job(sim, root, created.id) is None


@on_0_32
def test_J041_a_routed_callback_gets_the_schedule_built_from_its_envelope(
    sim: Simulation,
) -> None:
    """The second argument is the `Schedule` (no storage keys), built from the envelope alone:
    its `time` is 0, as the SDK's routed execution builds it."""
    root, owner = start(sim)
    created = sim.call(
        root,
        "at",
        [(Owner, "o")],
        "schedule",
        5,
        "fail",
        {"error": "boom"},
        retry={"max_attempts": 1},
    )
    fire_next_alarm(sim)
    assert attempts(sim, owner) == [
        {
            "callback": "fail",
            "id": created.id,
            "payload": {"error": "boom"},
            "retry": {"maxAttempts": 1},
            "time": 0,
            "type": "delayed",
            "delayInSeconds": 5,
        }
    ]


@on_0_32
def test_J058_a_one_shots_memory_limit_reset_goes_back_to_the_roots_breaker(
    sim: Simulation,
) -> None:
    """The owner does not stop early on a memory-limit reset: it makes every attempt, then
    re-raises without a warning of its own; the root keeps the job (no retry of the walk after
    a memory-limit reset), and its breaker takes a strike and moves the job on."""
    root, owner = start(sim)
    created = sim.call(root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": MEMORY_LIMIT})
    due = root_job(sim, root, created.id)["time"]  # type: ignore[index]
    fire_next_alarm(sim)
    assert len(attempts(sim, owner)) == 3
    assert len(events(sim, root, "schedule:execute")) == 1
    assert events(sim, root, "schedule:retry") == []
    assert warnings(sim, owner) == []
    assert any(w.startswith(f"Deferring job {created.id}") for w in warnings(sim, root))
    (strike,) = events(sim, root, "alarm:memory_limit_reset")
    assert (strike["strikes"], strike["limit"], strike["sealed"]) == (1, 3, False)
    assert events(sim, owner, "schedule:error") == events(sim, root, "schedule:error") == []
    kept = root_job(sim, root, created.id)
    assert kept is not None and kept["running"] == 0
    assert kept["time"] > due


@on_0_32
def test_J029_a_one_shots_transient_is_retried_by_the_owner_then_by_the_root(
    sim: Simulation,
) -> None:
    """A connection lost on every attempt: three attempts in the owner per walk, three walks
    (the root's own retry), then the job is kept at its time and the alarm rejects."""
    root, owner = start(sim)
    created = sim.call(
        root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": CONNECTION_LOST}
    )
    due = root_job(sim, root, created.id)["time"]  # type: ignore[index]
    sim.run_to_next_alarm()
    sim.run_while(lambda: not alarm_endings(sim, root), limit_ms=60_000)
    assert alarm_endings(sim, root) == ["alarm:failed"]
    assert len(attempts(sim, owner)) == 9
    assert [e["attempt"] for e in events(sim, root, "schedule:retry")] == [2, 3]
    assert [e["attempt"] for e in events(sim, owner, "schedule:retry")] == [2, 3] * 3
    assert warnings(sim, owner) == []
    kept = root_job(sim, root, created.id)
    assert kept is not None and (kept["time"], kept["running"]) == (due, 0)


@on_0_32
def test_J030_a_one_shots_code_update_reset_stops_the_owner_and_the_root_at_once(
    sim: Simulation,
) -> None:
    """One attempt in the owner, no retry of the walk, the job kept at its time."""
    root, owner = start(sim)
    created = sim.call(root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": CODE_UPDATE})
    due = root_job(sim, root, created.id)["time"]  # type: ignore[index]
    sim.run_to_next_alarm()
    sim.run_while(lambda: not alarm_endings(sim, root), limit_ms=60_000)
    assert alarm_endings(sim, root) == ["alarm:failed"]
    assert len(attempts(sim, owner)) == 1
    assert events(sim, root, "schedule:retry") == events(sim, owner, "schedule:retry") == []
    kept = root_job(sim, root, created.id)
    assert kept is not None and (kept["time"], kept["running"]) == (due, 0)


@on_0_32
def test_J043_an_intervals_memory_limit_reset_is_reported_by_the_owner(sim: Simulation) -> None:
    """A recurring schedule never defers from the owner: after its attempts the owner reports
    the failure, the root advances the job by its interval, and no strike is taken."""
    root, owner = start(sim)
    created = sim.call(
        root, "at", [(Owner, "o")], "schedule_every", 30, "fail", {"error": MEMORY_LIMIT}
    )
    fire_next_alarm(sim)
    assert len(attempts(sim, owner)) == 3
    (error,) = events(sim, owner, "schedule:error")
    assert (error["id"], error["attempts"]) == (created.id, 3)
    assert events(sim, root, "alarm:memory_limit_reset") == []
    job = root_job(sim, root, created.id)
    assert job is not None and job["time"] == sim.now_ms + 30_000


# -- 0.21.0 -------------------------------------------------------------------------------------
@on_0_21
def test_F046_on_0_21_the_owner_retries_with_its_own_defaults_and_gets_the_row(
    sim: Simulation,
) -> None:
    """The row stores only the caller's retry (none here): the owner makes its own two
    attempts, announces the run itself, and its callback gets the raw storage row."""
    root, owner = start(sim)
    created = sim.call(root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": "boom"})
    fire_next_alarm(sim)
    seen = attempts(sim, owner)
    assert len(seen) == 2
    assert seen[0]["id"] == created.id
    assert {"running", "owner_path", "owner_path_key"} <= set(seen[0])
    assert events(sim, owner, "schedule:execute") == [{"callback": "fail", "id": created.id}]
    (error,) = events(sim, owner, "schedule:error")
    assert error["attempts"] == 2


@on_0_21
def test_F046_on_0_21_a_one_shots_memory_limit_reset_is_a_failed_dispatch_on_the_root(
    sim: Simulation,
) -> None:
    """The owner warns as it defers; the root reports the dispatch's failure with
    `attempts: 0` and leaves the row due, and the breaker never sees it."""
    root, owner = start(sim)
    created = sim.call(root, "at", [(Owner, "o")], "schedule", 5, "fail", {"error": MEMORY_LIMIT})
    (row,) = sim.query(root, "SELECT time FROM cf_agents_schedules WHERE id = ?", created.id)
    fire_next_alarm(sim)
    assert len(attempts(sim, owner)) == 2
    assert any("memory-limit circuit breaker" in w for w in warnings(sim, owner))
    (error,) = events(sim, root, "schedule:error")
    assert (error["id"], error["attempts"]) == (created.id, 0)
    assert events(sim, root, "alarm:memory_limit_reset") == []
    assert sim.query(root, "SELECT time FROM cf_agents_schedules WHERE id = ?", created.id) == [row]
