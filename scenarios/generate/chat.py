"""The `chat` area: a chat host (`chat` workload) with turns, and clients on it.

A Think-like or AIChatAgent-like host, answering from the scenario's model or a model of its
own (a drawn reply in drawn chunks, a drawn delay between them); `say` turns at drawn times,
some at the same instant (a queue of turns); clients that connect, disconnect and reconnect,
so a turn's frames reach a client across a reconnect.
"""

from __future__ import annotations

from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.parts import Part, TimedStep, Use, call
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.emit import format_duration

__all__ = ["chat_part"]


HOSTS = ("think", "chat")


def chat_part(st: Any, alias: str, surface: Surface = FULL) -> Any:
    """A strategy of `Part`: one `chat` host named `alias` (of the hosts `surface` keeps
    open), and its clients."""

    @st.composite
    def part(draw: Any) -> Part:
        host = draw(st.sampled_from(surface.narrow(HOSTS, "chat_hosts")))
        agent: dict[str, Any] = {"workload": "chat", "host": host}
        uses = [Use("chat host", host, alias, "workload:answered")]
        delay = 200
        if surface.timed_models or draw(st.booleans()):
            chunks = draw(st.integers(1, 5))
            delay = draw(aligned(st, [1000], 1, 5000))
            agent["model"] = {
                "reply": "on it",
                "chunks": chunks,
                "chunk_delay": format_duration(delay),
            }
            uses.append(Use("model", "own reply in chunks", alias, "workload:answered"))
        turns = draw(st.integers(1, 3))
        steps = []
        window = 10_000 + turns * delay * 5
        for index in range(turns):
            at = draw(aligned(st, [delay, 1000], 0, window))
            steps.append(call(at, alias, "say", f"question {index + 1}"))
        uses.append(Use("save_messages", "a turn", alias, "workload:answered"))
        if turns > 1:
            uses.append(Use("save_messages", "turns queued", alias, "workload:answered"))
        clients: dict[str, str] = {}
        if draw(st.booleans()):
            name = f"{alias}-client"
            clients[name] = alias
            opened = draw(aligned(st, [delay], 0, window))
            steps.append(TimedStep(opened, "connect", {"client": name}))
            uses.append(Use("client", "connect", alias, "connection:open"))
            for action in draw(st.lists(st.sampled_from(("reconnect", "disconnect")), max_size=2)):
                at = opened + draw(aligned(st, [delay, 1000], 0, window))
                steps.append(TimedStep(at, action, {"client": name}))
                uses.append(Use("client", action, alias, "connection:close"))
        steps.sort(key=lambda step: step.at_ms)
        return Part({alias: agent}, tuple(steps), clients, tuple(uses), window)

    return part()
