"""Chat hosts as agent-tool parents: a detached run's finish and milestones become chat messages
(spec agent-tools §4.9–§4.11, §11 E29; T-73, T-76 … T-79, T-82), on a real Think-like or
AIChatAgent-like parent whose detached child is a `ScriptedChild`, with a scripted model for the
parent's reply turns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.chat import ChatAgent, ThinkAgent, tool
from sim import AgentRef, Simulation
from sim.model import (
    ScriptedModel,
    after_tool,
    asked,
    call,
    text,
    tool_calls,
    when,
)
from sim.sqlite import StorageError
from tests.agent_tools.scripted_child import ScriptedChild
from tests.chat.chat_agents import user
from tests.conformance.test_detached import StubbornChild
from tests.releases import on_both_releases

pytestmark = on_both_releases  # divergence T6 holds on both releases


class Researcher(ScriptedChild):
    pass


CHILDREN = {cls.__name__: cls for cls in (Researcher, StubbornChild)}
LINGER_MS = 5_000
DELIVERIES_DDL = (
    "CREATE TABLE IF NOT EXISTS deliveries (at INTEGER, status TEXT, active_request TEXT, "
    "queue_busy_turns INTEGER)"
)


class _Parent:
    """The test surface: dispatch a detached run, call the hooks again, log each finish hook."""

    silent_completion = False

    async def dispatch(
        self: Any, run_id: str, steps: list[Any], detached: Any, child: str = "Researcher"
    ) -> dict[str, Any]:
        result = await self.run_agent_tool(
            CHILDREN[child], input={"steps": steps}, run_id=run_id, detached=detached
        )
        return result.to_dict()

    async def _cf_detached_notify_finish(self: Any, run: Any, lifecycle: Any) -> None:
        self.sql(DELIVERIES_DDL)
        self.sql(
            "INSERT INTO deliveries VALUES (?, ?, ?, ?)",
            self.host.clock.now_ms(),
            lifecycle["status"],
            self._active_request_id,
            len(self._turn_states),
        )
        await super()._cf_detached_notify_finish(run, lifecycle)

    def format_detached_completion(self: Any, run: Any, result: Any) -> str:
        return "" if self.silent_completion else super().format_detached_completion(run, result)

    async def notify_finish_again(self: Any, run_id: str) -> None:
        """Deliver the run's finish hook once more, through the serialized slot as the ledger
        does (a redelivery)."""
        row = self._tools.store.read(run_id)
        info = AgentToolRunInfo.from_row(row)
        lifecycle = self._tools.store.result_from_row(row).lifecycle()
        await self._run_serialized_delivery(
            lambda: self._cf_detached_notify_finish(info, lifecycle)
        )

    async def notify_milestone_again(self: Any, run_id: str, name: str, mode: str) -> None:
        row = self._tools.store.read(run_id)
        info = AgentToolRunInfo.from_row(row)
        await self._cf_detached_notify_milestone(info, {"name": name, "sequence": 0}, mode)


class ThinkParent(_Parent, ThinkAgent):
    pass


class AiChatParent(_Parent, ChatAgent):
    pass


class _Lingering:
    """The finish hook goes on working for a while after it injected (a slow side effect)."""

    async def _cf_detached_notify_finish(self: Any, run: Any, lifecycle: Any) -> None:
        await super()._cf_detached_notify_finish(run, lifecycle)
        await self.host.clock.sleep(LINGER_MS)


class LingeringThinkParent(_Lingering, ThinkParent):
    pass


class LingeringAiChatParent(_Lingering, AiChatParent):
    pass


class _Canceller:
    """Its model can cancel the background run from inside a turn (a non-serialized delivery)."""

    def get_tools(self: Any) -> dict[str, Any]:
        return {"cancel_job": tool("Cancel the background job.", self._cancel_job)}

    async def _cancel_job(self: Any, input: Any, tool_call_id: str, signal: Any) -> str:
        await self.cancel_agent_tool(input["run_id"], "the user asked")
        return "cancelled"


class CancellingThinkParent(_Canceller, ThinkParent):
    pass


class CancellingAiChatParent(_Canceller, AiChatParent):
    pass


class LeaselessThinkParent(ThinkParent):
    """Taking the keepAlive lease that drains the notice's submission fails once (a storage
    fault in the write that arms the heartbeat)."""

    fail_next_lease = False

    async def _cf_detached_notify_finish(self: Any, run: Any, lifecycle: Any) -> None:
        self.fail_next_lease = True
        await super()._cf_detached_notify_finish(run, lifecycle)

    async def keep_alive(self: Any) -> Any:
        if self.fail_next_lease:
            self.fail_next_lease = False
            raise StorageError("injected storage fault (statement: the heartbeat's write)")
        return await super().keep_alive()


class SilentThinkParent(ThinkParent):
    silent_completion = True


class SilentAiChatParent(AiChatParent):
    silent_completion = True


PARENTS = [ThinkParent, AiChatParent]
parents = pytest.mark.parametrize("host", PARENTS, ids=lambda c: c.__name__)
LABEL = 'Background task "Researcher" (run r1)'


# -- reading ----------------------------------------------------------------------------------
def transcript(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY rowid")
    return [json.loads(r["message"]) for r in rows]


def said(sim: Simulation, ref: AgentRef) -> list[tuple[str, str]]:
    """(role, text) of each transcript message."""
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
        for m in transcript(sim, ref)
    ]


def submissions(sim: Simulation, ref: AgentRef) -> list[dict[str, Any]]:
    rows = sim.query(ref, "SELECT * FROM cf_think_submissions ORDER BY created_at, rowid")
    return [{**r, "metadata": json.loads(r["metadata_json"])} for r in rows]


def run_row(sim: Simulation, ref: AgentRef, run_id: str) -> dict[str, Any]:
    (row,) = sim.query(ref, "SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
    return row


def notice_keys(sim: Simulation, ref: AgentRef) -> list[str]:
    """The dedupe keys of the injected notifications: Think's submission idempotency keys,
    AIChatAgent's message ids."""
    if issubclass(ref.cls, ThinkAgent):
        return [s["idempotency_key"] for s in submissions(sim, ref)]
    return [m["id"] for m in transcript(sim, ref) if m["id"].startswith("detached-")]


def reply_model(sim: Simulation, reply: Any = None) -> ScriptedModel:
    return sim.register_model(ScriptedModel(default=reply or text("Noted.", delay_ms=100)))


# -- T-76, T-77: the finish notification ------------------------------------------------------
def test_T076_think_notify_submits_a_follow_up_turn_that_drains_to_a_model_reply(
    sim: Simulation,
) -> None:
    """A Think parent's notify hook submits the completion text under the key
    detached-finish:<run>:completed with the run's metadata; the submission drains to a model
    reply that follows the text in the transcript."""
    model = reply_model(sim, text("Reading the findings now."))
    ref = sim.agent(ThinkParent, "p")
    detached = {"notify": {"source": "agents-as-tools-background"}}
    sim.call(ref, "dispatch", "notify-run", [["finish", "completed", "detached summary"]], detached)
    sim.run_for(10_000)
    (submission,) = submissions(sim, ref)
    assert (submission["idempotency_key"], submission["status"]) == (
        "detached-finish:notify-run:completed",
        "completed",
    )
    assert submission["metadata"] == {
        "source": "agents-as-tools-background",
        "runId": "notify-run",
        "agentType": "Researcher",
        "status": "completed",
    }
    assert said(sim, ref) == [
        ("user", 'Background task "Researcher" (run notify-run) finished:\n\ndetached summary'),
        ("assistant", "Reading the findings now."),
    ]
    assert [r["trigger"] for r in model.requests] == ["submission"]
    assert run_row(sim, ref, "notify-run")["finish_delivered_at"] is not None


def test_a_think_submission_cut_off_mid_turn_is_settled_error_and_its_turn_recovered(
    sim: Simulation,
) -> None:
    """The notify submission's turn is running when the parent is evicted: at the restart the
    submission is settled `error` (it is never drained a second time) and chat recovery, not
    the drain, finishes its turn: one user message and one answer."""
    reply_model(sim, text("Reading the findings now.", chunks=2, delay_ms=2_000))
    ref = sim.agent(ThinkParent, "p")
    sim.call(ref, "dispatch", "notify-run", [["finish", "completed", "done"]], {"notify": True})
    sim.run_for(3_000)
    (submission,) = submissions(sim, ref)
    assert submission["status"] == "running"
    sim.evict(ref, "deploy")
    sim.agent(ThinkParent, "p")
    sim.run_for(60_000)
    (submission,) = submissions(sim, ref)
    assert (submission["status"], submission["error_message"]) == (
        "error",
        "the isolate died while this submission's turn ran; chat recovery resumes the turn",
    )
    assert [role for role, _ in said(sim, ref)] == ["user", "assistant"]
    assert sim.probes["chat.submission_interrupted"] == 1


def test_a_think_notice_is_drained_though_the_drain_cannot_take_its_lease(
    sim: Simulation,
) -> None:
    """The drain's keepAlive lease fails: the stored submission is drained without it, so the
    notice is announced and answered now, not left pending until some later restart."""
    reply_model(sim, text("Reading the findings now."))
    ref = sim.agent(LeaselessThinkParent, "p")
    sim.call(ref, "dispatch", "notify-run", [["finish", "completed", "done"]], {"notify": True})
    sim.run_for(10_000)
    (submission,) = submissions(sim, ref)
    assert submission["status"] == "completed"
    assert [role for role, _ in said(sim, ref)] == ["user", "assistant"]
    assert sim.probes["chat.submission_drain_unleased"] == 1


def test_T077_aichat_notify_injects_one_user_turn_across_a_redelivery(sim: Simulation) -> None:
    """An AIChatAgent parent injects a user message with the id detached-finish:<run>:completed
    and the metadata, and the model replies once; delivering the hook again adds nothing."""
    model = reply_model(sim)
    ref = sim.agent(AiChatParent, "p")
    sim.call(ref, "dispatch", "notify-run", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(10_000)
    sim.call(ref, "notify_finish_again", "notify-run")
    sim.run_for(10_000)
    messages = transcript(sim, ref)
    assert [(m["id"], m["role"]) for m in messages] == [
        ("detached-finish:notify-run:completed", "user"),
        (messages[1]["id"], "assistant"),
    ]
    assert messages[0]["metadata"] == {
        "source": "detached-agent-tool",
        "runId": "notify-run",
        "agentType": "Researcher",
        "status": "completed",
    }
    assert [r["trigger"] for r in model.requests] == ["detached-notify"]
    assert model.requests[0]["messages"][-1]["id"] == "detached-finish:notify-run:completed"


@parents
def test_E29_after_a_clear_only_aichat_injects_a_redelivery_again(
    sim: Simulation, host: type
) -> None:
    """AIChatAgent dedupes by the transcript, so once the chat is cleared a redelivery injects
    again; Think dedupes by its submission table, so it does not."""
    model = reply_model(sim)
    ref = sim.agent(host, "p")
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(10_000)
    sim.call(ref, "clear_messages")
    sim.call(ref, "notify_finish_again", "r1")
    sim.run_for(10_000)
    if host is AiChatParent:
        assert said(sim, ref) == [("user", f"{LABEL} finished:\n\nok"), ("assistant", "Noted.")]
        assert len(model.requests) == 2
    else:
        assert said(sim, ref) == []
        assert len(model.requests) == 1


@parents
def test_an_empty_completion_text_injects_nothing_yet_the_finish_counts(
    sim: Simulation, host: type
) -> None:
    """A format_detached_completion override returning "" injects no message and runs no turn,
    and the finish slot is still marked delivered."""
    model = reply_model(sim)
    silent = {ThinkParent: SilentThinkParent, AiChatParent: SilentAiChatParent}[host]
    ref = sim.agent(silent, "p")
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(10_000)
    assert transcript(sim, ref) == []
    assert model.requests == []
    assert run_row(sim, ref, "r1")["finish_delivered_at"] is not None


# -- T-78, T-79: milestones -------------------------------------------------------------------
@parents
def test_T078_a_narrated_milestone_is_one_assistant_line_and_no_turn(
    sim: Simulation, host: type
) -> None:
    """Narrate mode adds one assistant message detached-ms:<run>:sources-gathered with the
    milestone metadata, runs no model turn, and a second hook call adds nothing."""
    model = reply_model(sim)
    ref = sim.agent(host, "p")
    steps = [["milestone", "sources-gathered", {"count": 3}], ["hang"]]
    sim.call(ref, "dispatch", "r1", steps, {"on_milestones": ["sources-gathered"]})
    sim.run_for(1_000)
    sim.call(ref, "notify_milestone_again", "r1", "sources-gathered", "narrate")
    sim.run_for(10_000)
    (message,) = transcript(sim, ref)
    assert (message["id"], message["role"]) == ("detached-ms:r1:sources-gathered", "assistant")
    assert said(sim, ref) == [
        ("assistant", f'{LABEL} reached milestone "sources-gathered".\n\n{{\n  "count": 3\n}}')
    ]
    assert message["metadata"] == {
        "source": "detached-agent-tool",
        "runId": "r1",
        "agentType": "Researcher",
        "milestone": "sources-gathered",
    }
    assert model.requests == []


@parents
def test_T079_a_react_milestone_is_one_user_turn_and_one_reply(sim: Simulation, host: type) -> None:
    """React mode injects one user message keyed detached-ms:<run>:<name> (AIChatAgent: its
    id; Think: the submission's idempotency key) and one reply turn, however often the hook
    runs."""
    model = reply_model(sim, text("Want me to continue?"))
    ref = sim.agent(host, "p")
    steps = [["milestone", "needs-approval"], ["hang"]]
    milestones = {"names": ["needs-approval"], "mode": "react"}
    sim.call(ref, "dispatch", "r1", steps, {"on_milestones": milestones})
    sim.run_for(5_000)
    sim.call(ref, "notify_milestone_again", "r1", "needs-approval", "react")
    sim.run_for(10_000)
    assert said(sim, ref) == [
        ("user", f'{LABEL} reached milestone "needs-approval".'),
        ("assistant", "Want me to continue?"),
    ]
    assert notice_keys(sim, ref) == ["detached-ms:r1:needs-approval"]
    assert len(model.requests) == 1


# -- T-73: deliveries run between turns -------------------------------------------------------
@parents
def test_T073_a_delivery_arriving_mid_turn_runs_after_the_turn(sim: Simulation, host: type) -> None:
    """A detached finish delivered while a user turn streams waits on the turn queue: the hook
    runs after the turn ended, and the notification and its reply follow the turn's answer."""
    model = sim.register_model(
        ScriptedModel(
            rules=[when(asked("Background task"), reply=text("Noted.", delay_ms=100))],
            default=text("a slow answer", chunks=4, delay_ms=1_000),
        )
    )
    ref = sim.agent(host, "p")
    turn = sim.start_call(ref, "save_messages", [user("hi")])
    sim.run_for(500)
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "quick"]], {"notify": True})
    assert not turn.done(), "the child finished while the user turn still streamed"
    sim.wait(turn)
    turn_ended = sim.now_ms
    sim.run_for(10_000)
    (delivery,) = sim.query(ref, "SELECT * FROM deliveries")
    assert delivery["at"] >= turn_ended - 1
    assert (delivery["active_request"], delivery["queue_busy_turns"]) == (None, 0)
    assert said(sim, ref) == [
        ("user", "hi"),
        ("assistant", "a slow answer"),
        ("user", f"{LABEL} finished:\n\nquick"),
        ("assistant", "Noted."),
    ]
    assert len(model.requests) == 2


@parents
def test_a_cancel_from_inside_a_turn_is_answered_after_that_turn(
    sim: Simulation, host: type
) -> None:
    """A tool that cancels the detached run delivers `aborted` inline, inside the turn; the
    notification's reply turn waits for that turn to end instead of deadlocking on it."""
    model = sim.register_model(
        ScriptedModel(
            rules=[
                when(after_tool("cancel_job"), reply=text("Cancelled it.")),
                when(asked("Background task"), reply=text("Noted.")),
                when(asked("stop"), reply=tool_calls(call("cancel_job", {"run_id": "r1"}))),
            ]
        )
    )
    cancelling = {ThinkParent: CancellingThinkParent, AiChatParent: CancellingAiChatParent}[host]
    ref = sim.agent(cancelling, "p")
    sim.call(ref, "dispatch", "r1", [["hang"]], {"notify": True})
    assert sim.call(ref, "save_messages", [user("stop the job")])["status"] == "completed"
    sim.run_for(10_000)
    assert said(sim, ref) == [
        ("user", "stop the job"),
        ("assistant", "Cancelled it."),
        ("user", f"{LABEL} was cancelled."),
        ("assistant", "Noted."),
    ]
    assert notice_keys(sim, ref) == ["detached-finish:r1:aborted"]
    assert len(model.requests) == 3


# -- T-82 on a chat parent, and a redelivery after a crash --------------------------------------
@parents
def test_T082_a_give_up_then_the_real_completion_inject_two_messages(
    sim: Simulation, host: type
) -> None:
    """A budget give-up (the child refuses the teardown) and the child's later completion inject
    two notifications, keyed …:interrupted then …:completed, each answered by the model."""
    model = reply_model(sim)
    ref = sim.agent(host, "p")
    steps = [["sleep", 30_000], ["finish", "completed", "imported 80k rows"]]
    detached = {"notify": {"source": "imports"}, "max_budget_ms": 10_000}
    sim.call(ref, "dispatch", "r1", steps, detached, child="StubbornChild")
    sim.run_for(60_000)
    label = 'Background task "StubbornChild" (run r1)'
    assert said(sim, ref) == [
        ("user", f"{label} ran out of time before completing and was stopped."),
        ("assistant", "Noted."),
        ("user", f"{label} finished:\n\nimported 80k rows"),
        ("assistant", "Noted."),
    ]
    assert notice_keys(sim, ref) == [
        "detached-finish:r1:interrupted",
        "detached-finish:r1:completed",
    ]
    assert len(model.requests) == 2
    assert run_row(sim, ref, "r1")["status"] == "completed"


@parents
def test_a_redelivery_after_a_crash_injects_nothing_new(sim: Simulation, host: type) -> None:
    """The parent dies after its hook injected the notification but before the ledger marked the
    finish delivered; after the lease the backbone delivers the hook again, which finds its key
    taken and injects nothing more (Think also drains the accepted submission after the
    restart)."""
    model = reply_model(sim)
    lingering = {ThinkParent: LingeringThinkParent, AiChatParent: LingeringAiChatParent}[host]
    ref = sim.agent(lingering, "p")
    sim.call(ref, "dispatch", "r1", [["finish", "completed", "ok"]], {"notify": True})
    sim.run_for(1_000)
    sim.evict(ref)
    assert run_row(sim, ref, "r1")["finish_delivered_at"] is None
    assert notice_keys(sim, ref) == ["detached-finish:r1:completed"]
    sim.agent(lingering, "p")
    sim.run_for(300_000)
    assert run_row(sim, ref, "r1")["finish_delivered_at"] is not None
    finish_hooks = sim.trace.select("hook:on_finish", runId="r1", slot="finish")
    assert len(finish_hooks) == 2, "the hook was delivered again after the crash"
    assert notice_keys(sim, ref) == ["detached-finish:r1:completed"]
    assert said(sim, ref) == [("user", f"{LABEL} finished:\n\nok"), ("assistant", "Noted.")]
    assert len(model.requests) == 1
