"""Conformance, the child's self-heal after its own eviction (spec agent-tools §7.7, catalogue
group H): chat recovery continues or retries the interrupted turn, re-binds the run to it, and
the stale row is finalized when that turn settles; cancel reaches the recovery turn."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.child_runs import INTERRUPTED_BEFORE_FINISH
from agents_core.chat.turns import CHAT_RESPONSE_TYPE
from sim import Simulation
from sim.model import ScriptedModel, continuing, fail, stall, text, when
from tests.chat.chat_agents import HOSTS, ThinkChild, chunk_types, row, user
from tests.releases import on_both_releases

pytestmark = pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)

SLOW = text("AAAABBBBCCCCDDDD", chunks=4, delay_ms=1_000)
"""Start and text-start at 1 s, then one delta a second: 2.5 s in, one delta is stored."""
SILENT = stall(60_000, then=text("late"))
"""Nothing for a minute: evicted before any chunk, the turn is retried."""


def interrupt(
    sim: Simulation,
    host: type,
    first_reply: Any,
    recovered_reply: Any,
    at_ms: int,
    run_id: str = "run-1",
) -> Any:
    """Start a run whose turn gets `first_reply`, evict the child `at_ms` later, wake it (its
    recovery runs) and return the ref. Continuation requests get `recovered_reply`, as does
    every later request."""
    sim.register_model(
        ScriptedModel(
            rules=[when(continuing(), reply=recovered_reply)],
            default=[first_reply, recovered_reply],
        )
    )
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", run_id)
    sim.run_for(at_ms)
    sim.evict(ref)
    return ref


def recovery_attempts(sim: Simulation) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in sim.trace.select("chat:recovery:attempt")]


@pytest.mark.parametrize(
    ("mode", "first", "at_ms"), [("continue", SLOW, 2_500), ("retry", SILENT, 1_000)]
)
def test_T097_a_stale_row_is_completed_when_its_recovered_turn_answers(
    sim: Simulation, host: type, mode: str, first: Any, at_ms: int
) -> None:
    """After a CONTINUE or RETRY recovery, the row left `running` by the eviction is finalized
    `completed` as soon as the recovered turn settles with an answer; until recovery ran, an
    inspection (over a stale stub: no startup) leaves it `running`."""
    ref = interrupt(sim, host, first, text("Recovered answer.", delay_ms=100), at_ms)
    assert sim.call(ref, "inspect_agent_tool_run", "run-1")["status"] == "running"
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:settled"))
    assert [a["mode"] for a in recovery_attempts(sim)] == [mode]
    assert row(sim, ref, "run-1")["status"] == "completed"
    assert [r.get("status") for r in sim.trace.select("chat:child_run:reconciled")] == ["completed"]
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert inspection["status"] == "completed" and "Recovered answer." in inspection["summary"]
    assert "error" not in inspection
    assert sim.probes["chat.stale_child_run_reconciled"] == 1


def test_T097_a_stale_row_errors_when_its_recovered_turn_fails(sim: Simulation, host: type) -> None:
    """A RETRY whose recovered turn fails produces no answer: the row becomes `error` with the
    interrupted-before-finish prose."""
    ref = interrupt(sim, host, SILENT, fail("provider down", in_band=True), 1_000)
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:settled"))
    inspection = sim.call(ref, "inspect_agent_tool_run", "run-1")
    assert (inspection["status"], inspection["error"]) == ("error", INTERRUPTED_BEFORE_FINISH)


@on_both_releases
def test_T098_cancel_aborts_an_in_flight_recovery_turn(sim: Simulation, host: type) -> None:
    """While a recovered turn drives the run, `cancel_agent_tool_run` aborts that turn and seals
    the row `aborted`; nothing streams afterwards."""
    ref = interrupt(sim, host, SLOW, text("slow recovery", chunks=4, delay_ms=1_000), 2_500)
    client = sim.connect(ref)
    sim.run_while(lambda: not sim.trace.select("chat:recovery:rebind"))
    sim.run_for(1_500)
    sim.call(ref, "cancel_agent_tool_run", "run-1", "stop")
    frames_at_cancel = len(client.frames)
    sim.run_for(30_000)
    (settled,) = sim.trace.select("chat:recovery:settled")
    assert settled.get("status") == "aborted"
    assert row(sim, ref, "run-1")["status"] == "aborted"
    assert sim.call(ref, "inspect_agent_tool_run", "run-1")["status"] == "aborted"
    later = [f for f in client.frames[frames_at_cancel:] if isinstance(f, dict) and f.get("body")]
    assert [f for f in later if f["type"] == CHAT_RESPONSE_TYPE] == []


@pytest.mark.parametrize(
    ("mode", "first", "at_ms"), [("continue", SLOW, 2_500), ("retry", SILENT, 1_000)]
)
@on_both_releases
def test_T100_the_newest_active_row_is_rebound_to_the_recovered_turn(
    sim: Simulation, host: type, mode: str, first: Any, at_ms: int
) -> None:
    """On a CONTINUE and on a RETRY, the recovered turn's new request id is bound to the run
    (row and memory) before it streams, so a tail sees its frames. The attempt record names
    that new id on 0.21.0; on 0.32.0 it names the interrupted turn's (its origin)."""
    ref = interrupt(sim, host, first, text("wxyz", chunks=4, delay_ms=500), at_ms)
    before = row(sim, ref, "run-1")["request_id"]
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:rebind"))
    (attempt,) = recovery_attempts(sim)
    assert attempt["mode"] == mode
    (rebind,) = sim.trace.select("chat:recovery:rebind")
    recovered = rebind.get("requestId")
    assert row(sim, ref, "run-1")["request_id"] == recovered != before
    named = recovered if sim.release == "0.21.0" else before
    assert (attempt["requestId"], attempt["originRequestId"]) == (named, before)
    tail = sim.call(ref, "open_agent_tool_tail", "run-1")
    records = []
    while (batch := sim.call(ref, "read_agent_tool_tail", tail)) is not None:
        records += batch
    assert chunk_types(records)[-3:] == ["text-delta", "text-end", "finish"]
    assert row(sim, ref, "run-1")["status"] == "completed"


def test_T101_a_facet_that_never_ran_as_a_child_is_left_alone(sim: Simulation, host: type) -> None:
    """A plain chat turn recovered on an agent that never ran a child: no child-run table is
    created (Think) and no row is touched."""
    sim.register_model(ScriptedModel(default=[SLOW, text("after", delay_ms=100)]))
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("hi")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:settled"))
    tables = {r["name"] for r in sim.query(ref, "SELECT name FROM sqlite_master")}
    if host is ThinkChild:
        assert "cf_agent_tool_child_runs" not in tables
    else:
        assert sim.query(ref, "SELECT * FROM cf_ai_chat_agent_tool_runs") == []
    assert sim.trace.select("chat:recovery:rebind") == []


def test_T101_a_settled_row_is_not_rebound_by_an_unrelated_recovery(
    sim: Simulation, host: type
) -> None:
    """A completed run's row keeps its request id and status when a later plain chat turn is
    interrupted and recovered."""
    sim.register_model(
        ScriptedModel(
            rules=[when(continuing(), reply=text("after", delay_ms=100))],
            default=[text("done", delay_ms=100), SLOW],
        )
    )
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "go", "run-1")
    sim.run_for(1_000)
    settled = row(sim, ref, "run-1")
    assert settled["status"] == "completed"
    sim.start_call(ref, "save_messages", [user("unrelated")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:settled"))
    assert row(sim, ref, "run-1") == settled
    assert sim.trace.select("chat:recovery:rebind") == []


def test_T101_only_the_newest_of_two_active_rows_is_rebound(sim: Simulation, host: type) -> None:
    """With two runs active at the eviction (one streaming, one queued), the rebind picks the
    newest row only; the older keeps its request id."""
    sim.register_model(
        ScriptedModel(rules=[when(continuing(), reply=text("after", delay_ms=100))], default=SLOW)
    )
    ref = sim.agent(host, "c")
    sim.call(ref, "start_agent_tool_run", "first", "run-1")
    sim.run_for(10)
    sim.call(ref, "start_agent_tool_run", "second", "run-2")
    sim.run_for(2_500)
    older_request = row(sim, ref, "run-1")["request_id"]
    sim.evict(ref)
    sim.agent(host, "c")
    sim.run_while(lambda: not sim.trace.select("chat:recovery:rebind"))
    (rebind,) = sim.trace.select("chat:recovery:rebind")
    assert rebind.get("runId") == "run-2"
    assert row(sim, ref, "run-2")["request_id"] == rebind.get("requestId")
    assert row(sim, ref, "run-1")["request_id"] == older_request
