"""The scenario's `model:`: what chat hosts and Think-like or AIChatAgent-like tool children
stream their answers from.

Without one, the built-in model answers `ok` in one chunk at once, so a chat child's turn is
over before any fault can land in it, and its stored stream never holds more than a chunk. A
drawn model answers in one to five chunks a drawn delay apart (`timed_model`), or first calls
the child's `work` tool, whose steps report progress and milestones (milestone chunks stored in
the turn's stream) and sleep, and then answers in chunks (`working_model`): a turn long enough
for an eviction, a deploy or a restart of the parent to land in its middle, over a stream that
already holds several chunks.
"""

from __future__ import annotations

from typing import Any

from scenarios.generate.durations import aligned
from scenarios.hunt.emit import format_duration
from sim.units import parse_duration_ms

__all__ = ["MILESTONES", "model_busy_ms", "timed_model", "working_model"]

MILESTONES = ("halfway", "sources")
"""The milestone names a work step reports (a tools parent narrates `halfway`)."""
REPLY = "one two three four five"


def _reply(st: Any) -> Any:
    return st.builds(
        lambda chunks, delay: {"text": REPLY, "chunks": chunks, "delay": delay},
        st.integers(1, 5),
        aligned(st, [1000], 1, 5000).map(format_duration),
    )


def timed_model(st: Any) -> Any:
    """A model whose every reply comes in one to five chunks, a drawn delay apart."""
    return _reply(st).map(lambda reply: {"default": reply})


def _work_step(st: Any) -> Any:
    return st.one_of(
        st.sampled_from((0.25, 0.5, 1.0)).map(lambda f: {"progress": {"fraction": f}}),
        st.sampled_from(MILESTONES).map(lambda name: {"milestone": name}),
        aligned(st, [1000, 60_000], 1000, 120_000).map(lambda ms: {"sleep": ms}),
    )


def _work_call(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "work", "input": {"steps": steps}}


def working_model(st: Any) -> Any:
    """A model that has a tool child call its `work` tool (steps of progress, milestones and
    sleeps) and then answers in chunks; a chat host, which offers no such tool, is answered by
    its default, in chunks."""
    return st.builds(
        lambda steps, after, default: {
            "rules": [
                {"after_tool": "work", "reply": after},
                {
                    "offers": "work",
                    "reply": {"tool_calls": [{"name": "work", "input": {"steps": steps}}]},
                },
            ],
            "default": default,
        },
        st.lists(_work_step(st), min_size=1, max_size=4),
        _reply(st),
        _reply(st),
    )


def model_busy_ms(model: dict[str, Any] | None) -> int:
    """How long one turn answered by `model` may take at most: its work's sleeps and its
    replies' chunks (each a delay apart)."""
    if model is None:
        return 0
    replies = [model["default"], *(rule["reply"] for rule in model.get("rules", ()))]
    total = 0
    for reply in replies:
        if "text" in reply:
            total += int(reply["chunks"]) * parse_duration_ms(str(reply["delay"]))
        for call in reply.get("tool_calls", ()):
            total += sum(int(step.get("sleep", 0)) for step in call["input"]["steps"])
    return total
