"""The scripted model services of a scenario as plain JSON, for the real side's scripted model.

The port's chat hosts stream their answers from `sim.model.ScriptedModel` services built from
the scenario's `model:` sections (`scenarios.run.models`). The real side plays the same script
with its own player (`differential/src/agents/scripted-model.ts`), so the plan carries the
description, not the Python objects: for each service, its rules in order (each with its
predicates and its replies, the first match the first reply, every later one the last) and its
default replies. A reply is `{"text", "chunks", "delay_ms"}`, `{"tool_calls": [{name, input,
id}], "text", "delay_ms"}`, `{"stall_ms", "then"}` or `{"fail", "after_chunks", "in_band",
"partial", "delay_ms"}`; a `delay_ms` of None means the port's seeded latency, which the real
side cannot draw (`seeded_latency` says whether a script needs it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scenarios.language.schema import ModelRule, ModelScript
from sim.model import Reply, _Fail, _Stall, _Text, _ToolCalls

__all__ = ["model_description", "reply_description", "seeded_latency"]


def reply_description(reply: Reply) -> dict[str, Any]:
    """One reply as JSON (see the module docstring)."""
    if isinstance(reply, _Text):
        return {"text": reply.content, "chunks": reply.chunks, "delay_ms": reply.delay_ms}
    if isinstance(reply, _ToolCalls):
        calls = [{"name": c.tool_name, "input": c.input, "id": c.id} for c in reply.calls]
        return {"tool_calls": calls, "text": reply.text, "delay_ms": reply.delay_ms}
    if isinstance(reply, _Stall):
        then = None if reply.then is None else reply_description(reply.then)
        return {"stall_ms": reply.ms, "then": then}
    if isinstance(reply, _Fail):
        return {
            "fail": reply.message,
            "after_chunks": reply.after_chunks,
            "in_band": reply.in_band,
            "partial": reply.partial,
            "delay_ms": reply.delay_ms,
        }
    raise TypeError(f"no description for the model reply {reply!r}")


def _rule(rule: ModelRule) -> dict[str, Any]:
    return {
        "asked": rule.asked,
        "offers": rule.offers,
        "after_tool": rule.after_tool,
        "continuing": bool(rule.continuing),
        "replies": [reply_description(r) for r in rule.replies],
    }


def model_description(models: Mapping[str, ModelScript]) -> dict[str, Any]:
    """Service name -> `{"rules": [...], "default": [...]}`."""
    return {
        service: {
            "rules": [_rule(rule) for rule in script.rules],
            "default": [reply_description(r) for r in script.default],
        }
        for service, script in models.items()
    }


def _replies(description: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = list(description["default"])
    for rule in description["rules"]:
        out.extend(rule["replies"])
    return out


def _seeded(reply: Mapping[str, Any]) -> bool:
    if "stall_ms" in reply:
        then = reply["then"]
        return then is not None and _seeded(then)
    return reply.get("delay_ms") is None


def seeded_latency(description: Mapping[str, Any]) -> str | None:
    """The first service whose script leaves a reply's chunk delays to the port's seeded
    latency, or None: the real side has no such draw, so its chunks would land elsewhere."""
    for service, script in description.items():
        if any(_seeded(reply) for reply in _replies(script)):
            return service
    return None
