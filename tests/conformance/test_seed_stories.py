"""The user-facing stories of the seed page "Durable execution with fibers" (seeds/002), each
run end to end on the simulated platform with real evictions, deploys and alarms."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from agents_core import Request, Response
from sim import Simulation
from tests.conformance.fiber_agents import (
    FAST_HEARTBEAT,
    Poisoned,
    Recorder,
    Researcher,
    hook_calls,
    journal,
    run_rows,
)

STEPS = ["search", "analyze", "synthesize"]


@pytest.mark.parametrize("evictions_ms", [[15_000], [25_000], [15_000, 31_000]])
def test_research_fiber_resumes_from_its_snapshot_after_eviction(
    sim: Simulation, evictions_ms: list[int]
) -> None:
    """A research fiber killed between steps (once or twice) is resumed by the hook from its
    last checkpoint on the next request and finishes; no step that was stashed runs again."""
    ref = sim.agent(Researcher, "research")
    sim.call(ref, "begin_research")
    for at_ms in evictions_ms:
        sim.run_until(at_ms)
        sim.evict(ref, "deploy")
        sim.run_for(1_000)
        sim.fetch(ref)
    sim.run_for(60_000)
    steps = journal(sim, ref, "step")
    assert [row["data"] for row in steps] == STEPS
    assert len(hook_calls(sim, ref)) == len(evictions_ms)
    for call in hook_calls(sim, ref):
        done_before = [row["data"] for row in steps if row["t"] < call["t"]]
        assert call["data"]["snapshot"]["completed"] == done_before
    sim.fetch(ref)
    assert sim.instance_of(ref).state == {"result": {s: f"{s} of research" for s in STEPS}}
    assert run_rows(sim, ref) == []


class Webhooks(Recorder):
    """The seed's webhook receiver: accept with start_fiber under the webhook's key, reply in
    the fiber; the hook posts a recovery message and records the fiber as completed."""

    async def on_request(self, request: Request) -> Response:
        webhook_id, thread_id = request.body["webhookId"], request.body["threadId"]
        receipt = await self.start_fiber(
            "reply-to-webhook",
            lambda ctx: self._reply(ctx, webhook_id, thread_id),
            idempotency_key=f"webhook:{webhook_id}",
            metadata={"threadId": thread_id},
        )
        return Response(202 if receipt.accepted else 200, receipt.to_dict())

    async def _reply(self, ctx: Any, webhook_id: str, thread_id: str) -> None:
        ctx.stash({"webhookId": webhook_id, "threadId": thread_id})
        self._note("reply:begin", ctx.id)
        await self.host.clock.sleep(5_000)
        self._note("reply:posted", ctx.id, thread_id)

    async def recover(self, ctx: Any) -> Any:
        if ctx.name != "reply-to-webhook":
            return None
        snapshot = ctx.snapshot
        self._note("recovery:posted", ctx.id, snapshot["threadId"])
        return {"status": "completed", "snapshot": {**snapshot, "recovered": True}}


def test_webhook_is_handled_once_despite_three_deliveries_and_a_deploy(sim: Simulation) -> None:
    """Three deliveries of one webhook around a deploy start the work once; the hook finishes
    it, and exactly one reply (live or recovery) reaches the thread."""
    ref = sim.agent(Webhooks, "hooks")
    delivery = Request("POST", "/webhook", {"webhookId": "w-77", "threadId": "thread-5"})
    responses = [sim.fetch(ref, delivery)]
    sim.run_for(1_000)
    responses.append(sim.fetch(ref, delivery))
    sim.run_for(1_000)
    assert sim.deploy() == [ref.path]
    sim.run_for(1_000)
    responses.append(sim.fetch(ref, delivery))
    sim.run_for(60_000)
    assert [(r.status, r.body["accepted"], r.body["status"]) for r in responses] == [
        (202, True, "pending"),
        (200, False, "running"),
        (200, False, "completed"),
    ]
    assert len({r.body["fiberId"] for r in responses}) == 1
    assert len(journal(sim, ref, "reply:begin")) == 1
    replies = journal(sim, ref, "reply:posted") + journal(sim, ref, "recovery:posted")
    assert [row["data"] for row in replies] == ["thread-5"]
    (row,) = sim.query(ref, "SELECT status, snapshot, idempotency_key FROM cf_agents_fibers")
    assert row == {
        "status": "completed",
        "snapshot": '{"webhookId":"w-77","threadId":"thread-5","recovered":true}',
        "idempotency_key": "webhook:w-77",
    }
    assert run_rows(sim, ref) == []


class Syncer(Recorder):
    """A background agent: a schedule starts a paged sync in a fiber that nobody awaits."""

    async def setup(self) -> None:
        await self.schedule(10, "sync")

    async def sync(self, payload: Any = None, row: Any = None) -> None:
        self.host.tasks.wait_until(self.run_fiber("sync", lambda ctx: self._pages(ctx, 0)))

    async def _pages(self, ctx: Any, first: int) -> None:
        for page in range(first, 6):
            await self.host.clock.sleep(10_000)
            self._note("page", ctx.id, page)
            ctx.stash({"next": page + 1})

    async def recover(self, ctx: Any) -> Any:
        if ctx.name == "sync" and ctx.snapshot:
            first = ctx.snapshot["next"]
            self.host.tasks.wait_until(self.run_fiber("sync", lambda c: self._pages(c, first)))
        return None


def test_background_agent_without_clients_is_recovered_by_its_alarm(sim: Simulation) -> None:
    """With no request, connection or call after a deploy, the persisted heartbeat alarm alone
    wakes the agent, which resumes its sync and finishes every page once."""
    ref = sim.agent(Syncer, "bg")
    sim.call(ref, "setup")
    sim.run_until(45_000)
    sim.deploy()
    sim.run_for(120_000)
    inputs = [
        r for r in sim.trace.select(agent=ref.path) if r.event in ("rpc", "request", "connect")
    ]
    assert all(r.t_ms < 45_000 for r in inputs)
    (wake,) = [r for r in sim.trace.select("incarnation:start", agent=ref.path) if r.inc == 2]
    assert wake.get("trigger") == "alarm"
    pages = [(row["data"], row["inc"]) for row in journal(sim, ref, "page")]
    assert pages == [(0, 1), (1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]
    assert [c["data"]["snapshot"] for c in hook_calls(sim, ref)] == [{"next": 3}]
    assert run_rows(sim, ref) == []
    assert sim.alarm_of(ref) is None


def test_always_throwing_hook_backs_off_then_is_dropped_at_max_age(sim: Simulation) -> None:
    """A hook that always throws is retried by alarms whose delays double while the agent stays
    warm (capped, never a busy loop) until a failed attempt past the 10-minute max age drops
    the row with a max_age_exceeded skip; then nothing runs for it again."""

    class TenMinutes(Poisoned):
        options = {**FAST_HEARTBEAT, "fiber_recovery_max_age_ms": 600_000}

    ref = sim.agent(TenMinutes, "poison")
    sim.start_call(ref, "run", "poison", [("sleep", 600_000)])
    sim.run_for(500)
    (row,) = run_rows(sim, ref)
    sim.evict(ref, "deploy")
    sim.run_for(3_600_000)
    calls = hook_calls(sim, ref)
    by_incarnation: dict[int, list[int]] = {}
    for call in calls:
        times = by_incarnation.setdefault(call["inc"], [])
        if call["t"] not in times:
            times.append(call["t"])
    growing = [times for times in by_incarnation.values() if len(times) >= 4]
    assert growing, by_incarnation
    for times in by_incarnation.values():
        gaps = [later - earlier for earlier, later in pairwise(times)]
        assert gaps == [8_000 * 2**i for i in range(len(gaps))], times
    all_times = sorted({call["t"] for call in calls})
    assert all(2_000 <= later - earlier <= 300_000 for earlier, later in pairwise(all_times))
    (skip,) = sim.trace.select("fiber:recovery:skipped", agent=ref.path)
    assert (skip.get("fiberId"), skip.get("reason")) == (row["id"], "max_age_exceeded")
    assert skip.t_ms == calls[-1]["t"]
    assert skip.t_ms - row["created_at"] > 600_000
    assert all_times[-2] - row["created_at"] <= 600_000
    assert run_rows(sim, ref) == []
    assert sim.alarm_of(ref) is None
