"""Conformance on SDK 0.32.0: the caller's veto on chat recovery, `should_keep_recovering`, and
the exhaustion reason `recovery_aborted` it gives (spec sdk-0.32 §8.1)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from agents_core.chat.recovery_budget import (
    ChatRecoveryProgressContext,
    ask_caller,
    evaluate_incident,
)
from agents_core.chat.recovery_config import resolve_chat_recovery_config
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, stall
from tests.chat.chat_agents import HOSTS, AiChatChild, user

TERMINAL = "The assistant was interrupted and could not recover. Please try again."


def with_options(host: type, **options: Any) -> type:
    """`host` with `chat_recovery` set to `options`."""
    return type(f"Veto{host.__name__}", (host,), {"chat_recovery": options})


def evict_and_wake(sim: Simulation, host: type, ref: AgentRef, after_ms: int) -> None:
    sim.run_for(after_ms)
    sim.evict(ref)
    sim.agent(host, ref.path.split("/")[-1])
    sim.run_for(10)


def incident(sim: Simulation, ref: AgentRef) -> dict[str, Any]:
    (only,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    return only


def stalled_turn(sim: Simulation, host: type) -> tuple[AgentRef, ScriptedModel, Any]:
    """A connected client and a turn whose model never answers."""
    model = sim.register_model(ScriptedModel(default=stall(3_600_000)))
    ref = sim.agent(host, "c")
    client = sim.connect(ref)
    sim.start_call(ref, "save_messages", [user("go")])
    return ref, model, client


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_should_keep_recovering_false_gives_the_turn_up_with_recovery_aborted(
    sim: Simulation, host: type
) -> None:
    """The hook is not asked when the incident opens; at the next wake it is asked with the
    incident's attempt, work and age, and its `False` gives the turn up with
    `recovery_aborted`: the terminal message to clients, the last terminal outcome, and no
    further model call."""
    asked: list[ChatRecoveryProgressContext] = []

    def veto(ctx: ChatRecoveryProgressContext) -> bool:
        asked.append(ctx)
        return False

    vetoed = with_options(host, should_keep_recovering=veto)
    ref, model, client = stalled_turn(sim, vetoed)
    evict_and_wake(sim, vetoed, ref, 5_000)
    assert asked == [] and not sim.trace.select("chat:recovery:exhausted")
    detected_at = incident(sim, ref)["detectedAt"]
    origin = incident(sim, ref)["originRequestId"]
    found = incident(sim, ref)["incidentId"]
    evict_and_wake(sim, vetoed, ref, 40_000)
    (ctx,) = asked
    (question,) = [m for m in sim.instance_of(ref).messages if m["role"] == "user"]
    assert found == f"{origin}:{question['id']}"
    assert (ctx.incident_id, ctx.recovery_root_request_id) == (found, origin)
    assert (ctx.attempt, ctx.max_attempts, ctx.recovery_kind) == (2, 10, "retry")
    assert ctx.work == 0 and 40_000 < ctx.age_ms <= sim.now_ms - detected_at
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "recovery_aborted"
    stored = incident(sim, ref)
    assert (stored["status"], stored["reason"]) == ("exhausted", "recovery_aborted")
    kv = sim.instance_of(ref).host.kv
    assert kv.get("cf:chat:last-terminal") == {
        "requestId": exhausted.get("requestId"),
        "body": TERMINAL,
    }
    assert kv.get("cf:chat:recovering") is None
    assert not stored.get("attemptsInFlight"), "the vetoing wake left no attempt running"
    requests = len(model.requests)
    sim.run_for(120_000)
    assert len(model.requests) == requests, "a vetoed turn is never run again"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_an_async_veto_counts_and_any_answer_but_false_goes_on(sim: Simulation, host: type) -> None:
    """An awaitable answer is awaited; `None`, `True` or a falsy value that is not `False`
    keeps recovering, and only the `False` that follows gives the turn up."""
    answers = iter([None, 0, True, False])

    async def veto(ctx: ChatRecoveryProgressContext) -> Any:
        return next(answers)

    vetoed = with_options(host, should_keep_recovering=veto, max_interrupted_attempts=math.inf)
    ref, _, _ = stalled_turn(sim, vetoed)
    evict_and_wake(sim, vetoed, ref, 5_000)
    for _ in range(3):
        evict_and_wake(sim, vetoed, ref, 40_000)
    assert not sim.trace.select("chat:recovery:exhausted")
    evict_and_wake(sim, vetoed, ref, 40_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "recovery_aborted"


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_raising_veto_is_logged_and_recovery_goes_on(sim: Simulation, host: type) -> None:
    """A hook that raises neither gives the turn up nor stops its recovery: the error is
    logged and the recovered turn runs."""

    def veto(ctx: ChatRecoveryProgressContext) -> bool:
        raise RuntimeError("budget service down")

    vetoed = with_options(host, should_keep_recovering=veto)
    ref, model, _ = stalled_turn(sim, vetoed)
    evict_and_wake(sim, vetoed, ref, 5_000)
    before = len(model.requests)
    evict_and_wake(sim, vetoed, ref, 40_000)
    sim.run_for(1_000)
    assert not sim.trace.select("chat:recovery:exhausted")
    assert incident(sim, ref)["status"] == "attempting"
    assert len(model.requests) == before + 1, "the recovered turn asked the model again"
    errors = [r.get("message") for r in sim.trace.select("console:error")]
    assert any("should_keep_recovering" in str(m) and "service down" in str(m) for m in errors)


@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_hard_bound_wins_and_the_veto_is_not_asked(sim: Simulation, host: type) -> None:
    """When the interrupted attempts already give the turn up, the hook is not asked and the
    reason is the bound's, ahead of `recovery_aborted`."""
    asked: list[ChatRecoveryProgressContext] = []

    def veto(ctx: ChatRecoveryProgressContext) -> bool:
        asked.append(ctx)
        return False

    vetoed = with_options(host, should_keep_recovering=veto, max_interrupted_attempts=2)
    ref, _, _ = stalled_turn(sim, vetoed)
    evict_and_wake(sim, vetoed, ref, 5_000)
    evict_and_wake(sim, vetoed, ref, 40_000)
    (exhausted,) = sim.trace.select("chat:recovery:exhausted")
    assert exhausted.get("reason") == "interrupted_attempts_exceeded"
    assert asked == []


def test_the_veto_is_not_asked_past_the_attempt_cap_nor_for_a_turn_waiting_on_the_client() -> None:
    """`ask_caller` asks only a look that is not the first, with no bound spent, within
    `max_attempts`, and not waiting on the client."""
    asked: list[int] = []

    def veto(ctx: ChatRecoveryProgressContext) -> bool:
        asked.append(ctx.attempt)
        return False

    config = resolve_chat_recovery_config({"max_attempts": 2, "should_keep_recovering": veto})
    seen = {"attempt": 2, "lastAttemptAt": 0, "detectedAt": 0, "progress": 0, "workBaseline": 0}

    def look(existing: dict[str, Any] | None, awaiting: bool) -> str | None:
        verdict = evaluate_incident(
            existing,
            newly_interrupted=0,
            progress_now=0,
            awaiting_client=awaiting,
            config=config,
            now=40_000,
        )
        judged = ask_caller(
            verdict,
            config,
            incident_id="r",
            request_id="r",
            recovery_kind="retry",
            now=40_000,
            on_error=lambda error: None,
        )
        try:
            judged.send(None)
        except StopIteration as done:
            return done.value.reason  # type: ignore[no-any-return]
        raise AssertionError("a synchronous hook never suspends")

    assert look(None, False) is None, "the first look"
    assert look(seen, False) == "max_attempts_exceeded", "attempt 3 > 2"
    assert look({**seen, "attempt": 1}, True) is None, "waiting on the client"
    assert asked == []
    assert look({**seen, "attempt": 1}, False) == "recovery_aborted"
    assert asked == [2]


def test_0_21_0_has_no_veto() -> None:
    """0.21.0 does not read `chat_recovery`: a hook answering `False` changes nothing."""
    with Simulation(seed=11, sdk="0.21.0") as sim:
        vetoed = with_options(AiChatChild, should_keep_recovering=lambda ctx: False)
        ref, _, _ = stalled_turn(sim, vetoed)
        evict_and_wake(sim, vetoed, ref, 5_000)
        evict_and_wake(sim, vetoed, ref, 40_000)
        assert not sim.trace.select("chat:recovery:exhausted")
