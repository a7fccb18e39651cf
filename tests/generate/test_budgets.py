"""A generated scenario whose heartbeats may outrun the default events and records budgets
carries budgets of its own (`limits:`), so that a long run with a one-second keepAlive that
drawn crashes keep busy is not stopped as a runaway before its liveness phase can settle."""

from __future__ import annotations

from scenarios.generate.document import DEFAULT_EVENTS, Generated
from scenarios.generate.parts import TimedStep
from scenarios.language.loader import parse_scenario

HOUR_MS = 3_600_000


def _generated(interval: str | None, last_step_ms: int, liveness_ms: int) -> Generated:
    agent: dict[str, object] = {"workload": "fibers", "fibers": [{"name": "f1", "steps": 1}]}
    if interval is not None:
        agent["keep_alive_interval"] = interval
    step = TimedStep(last_step_ms, "call", {"agent": "worker", "method": "status", "wait": False})
    return Generated(
        name="budgets",
        seed=1,
        faults="none",
        agents={"worker": agent},
        steps=(step,),
        fault_numbers=frozenset(),
        liveness_ms=liveness_ms,
    )


def test_a_one_second_heartbeat_over_hours_gets_budgets_of_its_own() -> None:
    """Found by generate on 0.32.0 (seed 3): a worker with a 1 s keepAlive whose fiber drawn
    crashes kept restarting for 2h46m used up 100,000 events six minutes into the liveness
    phase, where its fiber would have finished in eight."""
    generated = _generated("1s", 10_000_000, 30_000_000)
    limit = generated.events_limit()
    assert limit is not None and limit >= 12 * (40_000_000 // 1_000)
    text = generated.text()
    assert f"limits: {{events: {limit}, records: {limit}}}" in text
    scenario = parse_scenario(text, "budgets.yaml")
    assert scenario.limits == {"events": limit, "records": limit}


def test_a_default_heartbeat_over_an_hour_keeps_the_default_budgets() -> None:
    generated = _generated(None, 60_000, HOUR_MS)
    assert generated.events_limit() is None
    assert "limits:" not in generated.text()
    assert DEFAULT_EVENTS == 100_000
