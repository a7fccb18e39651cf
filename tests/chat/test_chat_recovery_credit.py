"""A chat host's own recovery as seen by agent tools: the parent's recovery-progress credit while
a detached child streams (spec agent-tools §7.8, T-150) and the classification of chat recovery
incidents (§7.7, T-99)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.parent import (
    AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS,
    CHAT_RECOVERY_PROGRESS_KEY,
)
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, stall, text
from tests.chat.chat_agents import ThinkChild, user
from tests.chat.test_chat_parent_notify import PARENTS
from tests.releases import on_both_releases, on_release

parents = pytest.mark.parametrize("host", PARENTS, ids=lambda c: c.__name__)


def credit(sim: Simulation, ref: AgentRef) -> dict[str, Any] | None:
    """The parent's durable recovery-progress record, `{count, at}`."""
    rows = sim.query(ref, "SELECT value FROM _cf_KV WHERE key = ?", CHAT_RECOVERY_PROGRESS_KEY)
    return json.loads(rows[0]["value"]) if rows else None


# -- T-150: parent credit ---------------------------------------------------------------------
@parents
@on_release("0.21.0")
def test_T150_forwarded_child_chunks_credit_at_most_once_per_window(
    sim: Simulation, host: type
) -> None:
    """A silent child earns nothing; a streaming child credits on its first chunk, not again
    within 5 s, again once the window passed; after a restart the first chunk credits at once."""
    sim.register_model(ScriptedModel(default=text("ok")))
    ref = sim.agent(host, "p")
    sim.call(ref, "dispatch", "quiet", [["sleep", 3_000], ["hang"]], True)
    sim.run_for(3_000)
    assert credit(sim, ref) is None, "a silent child earns no credit"

    steps = [
        ["text", "a"],
        ["sleep", 1_000],
        ["text", "b"],
        ["sleep", 1_000],
        ["text", "c"],
        ["sleep", 4_000],
        ["text", "d"],
        ["hang"],
    ]
    sim.call(ref, "dispatch", "r1", steps, True)
    sim.run_for(2_500)
    first = credit(sim, ref)
    assert first is not None and first["count"] == 1, "three forwards within 5 s credit once"
    sim.run_for(5_000)
    second = credit(sim, ref)
    assert second is not None and second["count"] == 2
    assert second["at"] - first["at"] >= AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS

    sim.evict(ref)
    sim.agent(host, "p")
    sim.call(ref, "dispatch", "r2", [["text", "e"], ["hang"]], True)
    sim.run_for(500)
    third = credit(sim, ref)
    assert third is not None and third["count"] == 3, "a fresh isolate credits its first call"
    assert third["at"] - second["at"] < AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS


# -- T-99: classification ---------------------------------------------------------------------
class Classified(ThinkChild):
    def put_incident(self, key: str, incident: dict[str, Any]) -> None:
        self.host.kv.put(INCIDENT_PREFIX + key, incident)


def incident(status: str, run_id: str = "run-1") -> dict[str, Any]:
    return {"originRequestId": "req", "attempts": 1, "status": status, "runId": run_id}


@on_both_releases
@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], "none"),
        (["recovered"], "none"),
        (["failed"], "failed"),
        (["exhausted", "recovered"], "failed"),
        (["scheduled"], "in-progress"),
        (["failed", "scheduled"], "in-progress"),
        (["scheduled", "failed"], "in-progress"),
        (["exhausted", "scheduled", "failed"], "in-progress"),
        # Ours: an `attempting` incident no turn of this isolate drives died with its isolate.
        (["attempting"], "failed"),
    ],
)
def test_T099_incidents_classify_none_failed_or_in_progress(
    sim: Simulation, statuses: list[str], expected: str
) -> None:
    """Incident statuses classify as none, failed or in-progress, and a live incident wins over
    a failed one whichever order they are stored in."""
    ref = sim.agent(Classified, "c")
    for index, status in enumerate(statuses):
        sim.call(ref, "put_incident", f"{index:02d}", incident(status))
    assert sim.call(ref, "classify_chat_recovery") == expected
    assert sim.call(ref, "classify_chat_recovery", "run-1") == expected


@on_both_releases
def test_T099_classification_is_scoped_to_a_run(sim: Simulation) -> None:
    """With a run id only that run's incidents count: another run's live incident does not make
    this one in-progress, though the agent-wide classification is."""
    ref = sim.agent(Classified, "c")
    sim.call(ref, "put_incident", "a", incident("failed", "run-1"))
    sim.call(ref, "put_incident", "b", incident("scheduled", "run-2"))
    assert sim.call(ref, "classify_chat_recovery") == "in-progress"
    assert sim.call(ref, "classify_chat_recovery", "run-1") == "failed"
    assert sim.call(ref, "classify_chat_recovery", "run-3") == "none"


@on_both_releases
def test_T099_a_real_interrupted_turn_is_in_progress_until_recovered(sim: Simulation) -> None:
    """A turn an eviction interrupted is in-progress before recovery has seen it (its fiber row
    is orphaned) and while it runs, and none once the recovered turn answered."""
    sim.register_model(ScriptedModel(default=[stall(60_000), text("recovered")]))
    ref = sim.agent(Classified, "c")
    sim.start_call(ref, "save_messages", [user("hi")])
    sim.run_for(1_000)
    sim.evict(ref)
    assert sim.call(ref, "classify_chat_recovery") == "in-progress"  # stale stub: no startup
    sim.agent(Classified, "c")
    assert sim.call(ref, "classify_chat_recovery") == "in-progress"
    sim.run_while(lambda: not sim.trace.select("chat:recovery:settled"))
    assert sim.call(ref, "classify_chat_recovery") == "none"
