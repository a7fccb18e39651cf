"""Helpers the chat recovery tests share: a turn interrupted mid-stream, a host whose recovered
turn raises once, and the trace events of one agent."""

from __future__ import annotations

from typing import Any

from agents_core.chat import current_chat_turn
from sim import AgentRef, Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import user

__all__ = [
    "MEMORY_LIMIT",
    "events",
    "interrupt_a_turn",
    "raising_once_in_recovery",
    "striking_once_in_recovery",
]

MEMORY_LIMIT = "Durable Object's isolate exceeded its memory limit and was reset."


def raising_once_in_recovery(
    host: type, message: str, *, prefix: str, options: dict[str, Any] | None = None
) -> type:
    """`host` (named `prefix` + its name) whose system prompt raises `message` the first time
    a recovered turn asks it, with `options` over the host's own."""
    raised: list[bool] = []

    def get_system_prompt(self: Any) -> str | None:
        turn = current_chat_turn()
        if turn is not None and turn.trigger == "recovery" and not raised:
            raised.append(True)
            raise RuntimeError(message)
        return None

    attributes: dict[str, Any] = {"get_system_prompt": get_system_prompt}
    if options is not None:
        attributes["options"] = {**host.options, **options}
    return type(f"{prefix}{host.__name__}", (host,), attributes)


def striking_once_in_recovery(host: type, limit: int = 3) -> type:
    """`host` whose recovered turn hits a memory-limit reset the first time it asks for its
    system prompt (after the continuation handed it off), its breaker sealing at `limit`."""
    options = {"max_alarm_memory_limit_strikes": limit}
    return raising_once_in_recovery(host, MEMORY_LIMIT, prefix="Striking", options=options)


def interrupt_a_turn(
    sim: Simulation, host: type, delay_ms: int = 5_000
) -> tuple[AgentRef, ScriptedModel]:
    """A turn streaming slowly, its isolate killed 2 s in, the agent woken again."""
    model = sim.register_model(
        ScriptedModel(default=text("the answer", chunks=4, delay_ms=delay_ms))
    )
    ref = sim.agent(host, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_000)
    sim.evict(ref)
    sim.agent(host, "c")
    return ref, model


def events(sim: Simulation, ref: AgentRef, name: str, **match: Any) -> list[Any]:
    """The trace records `name` of the agent at `ref` (matching `match`)."""
    return sim.trace.select(name, agent=ref.path, **match)
