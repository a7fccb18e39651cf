"""What a client must show of an agent-tool run: an independent model of the client reducer's
parts and milestones, written from the spec (agent-tools §3.5, §5.6, catalogue K) and seed
decision S5, sharing no code with the runtime's reducer.

`ClientRunModel` takes a run's genuine chunks, each once (the checker decides which frames are
genuine), and builds what the spec's "standard UI-chunk builder" makes of them (§3.5):
- text and reasoning deltas append to the newest part of their type, or open one when there is
  none; `*-end` marks the newest part of its type done. The spec says only that deltas append;
  which part they append to is the SDK builder's (`applyChunkToParts`: the last part of the
  type, whatever the chunk's `id`), as the spec's precedence rules say;
- tool chunks create and then update the part of their `toolCallId` (`tool-<toolName>`, states
  `input-streaming` -> `input-available` -> `output-available` / `output-error`). Input chunks
  write first and only once, as the SDK's builder (`applyChunkToParts`, which its client
  reducer calls) does: a second `tool-input-start` changes nothing, a delta (which writes the
  chunk's own `input`, absent in the AI SDK's deltas) or an `input-available` moves a part
  only while its input streams, and an input error does not overwrite an output; an input
  is kept as an object (a string of a JSON object is parsed, anything else is `{}`) (the spec's
  "tool parts update" is read from that code);
- a non-transient `data-*` chunk appends a part, or replaces the data of an existing part of the
  same type and id; a transient one adds nothing, nor does a `data-agent-progress` chunk (sent
  transient, §5.2, and a live-only projection, §5.6, with or without the flag);
- `start-step` (or `step-start`) opens a `step-start` part; `file`, `source-url` and
  `source-document` each add a part of their own type; `start`, `finish`, `finish-step`,
  `message-metadata` and `error` add no part;
- a chunk the builder cannot apply (an output for an unknown tool call, an end of an id never
  opened, a body that is not a JSON object) leaves the run unchanged.
Milestones (§3.5, T-134; S2/S5): a `data-agent-milestone` chunk with a string `data.name` joins
`milestones` keyed by its `sequence` (default 0), kept sorted; under S5 one whose sequence is
already shown adds nothing, not even a part.

`project(parts)` reduces a list of parts (the runtime's or the model's) to the fields the spec
names, so the comparison does not depend on bookkeeping fields it leaves open.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClientRunModel", "project", "project_part"]

PROGRESS = "data-agent-progress"
MILESTONE = "data-agent-milestone"
_NO_PART = frozenset({"start", "finish", "finish-step", "message-metadata", "error", "abort"})


def project_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a part the spec says what to hold."""
    kind = str(part.get("type"))
    if kind in ("text", "reasoning"):
        return {"type": kind, "text": part.get("text"), "state": part.get("state")}
    if kind.startswith("tool-"):
        keys = ("toolCallId", "state", "input", "output", "errorText")
        return {"type": kind, **{k: part.get(k) for k in keys if part.get(k) is not None}}
    if kind.startswith("data-"):
        return {"type": kind, "id": part.get("id"), "data": part.get("data")}
    return {"type": kind}


def project(parts: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [project_part(p) for p in parts or ()]


@dataclass
class ClientRunModel:
    """One run's parts and milestones, as the model builds them from genuine chunks."""

    parts: list[dict[str, Any]] = field(default_factory=list)
    milestones: list[tuple[Any, Any]] = field(default_factory=list)
    _tools: dict[Any, int] = field(default_factory=dict)

    def apply(self, chunk: Any) -> None:
        """Apply one genuine chunk (parsed JSON); what cannot be applied changes nothing."""
        if not isinstance(chunk, dict) or not isinstance(chunk.get("type"), str):
            return
        kind = chunk["type"]
        if kind == MILESTONE:
            data = chunk.get("data")
            if isinstance(data, dict) and isinstance(data.get("name"), str):
                number = data.get("sequence")
                number = number if _numeric(number) else 0
                if any(seq == number for _, seq in self.milestones):
                    return
                self.milestones = sorted([*self.milestones, (data["name"], number)], key=_seq)
        if kind in _NO_PART or kind == PROGRESS:
            return
        if kind in ("start-step", "step-start"):
            self.parts.append({"type": "step-start"})
        elif kind in ("file", "source-url", "source-document"):
            self.parts.append({"type": kind})
        elif kind in ("text-start", "reasoning-start"):
            self.parts.append(
                {"type": kind.removesuffix("-start"), "text": "", "state": "streaming"}
            )
        elif kind in ("text-delta", "reasoning-delta", "text-end", "reasoning-end"):
            base, _, step = kind.partition("-")
            newest = [n for n, part in enumerate(self.parts) if part.get("type") == base]
            if not newest:
                if step == "delta":
                    text = chunk.get("delta") or ""
                    self.parts.append({"type": base, "text": str(text), "state": "streaming"})
                return
            part = dict(self.parts[newest[-1]])
            if step == "delta":
                part["text"] = str(part["text"]) + str(chunk.get("delta") or "")
            else:
                part["state"] = "done"
            self.parts[newest[-1]] = part
        elif kind.startswith("tool-"):
            self._tool(kind, chunk)
        elif kind.startswith("data-"):
            self._data(kind, chunk)

    def _tool(self, kind: str, chunk: Mapping[str, Any]) -> None:
        call = chunk.get("toolCallId")
        at = self._tools.get(call)
        if kind in ("tool-input-start", "tool-input-available", "tool-input-error"):
            state = {
                "tool-input-start": "input-streaming",
                "tool-input-available": "input-available",
                "tool-input-error": "output-error",
            }[kind]
            if at is not None:
                # First write wins: an input chunk moves a part only while its input streams
                # (an error, until an output is in); a later one is a provider's replay.
                now = self.parts[at].get("state")
                if kind == "tool-input-start" or (
                    now != "input-streaming"
                    and (kind == "tool-input-available" or str(now).startswith("output-"))
                ):
                    return
            part: dict[str, Any] = (
                {"type": f"tool-{chunk.get('toolName')}"} if at is None else dict(self.parts[at])
            )
            part.update(toolCallId=call, state=state)
            if kind != "tool-input-start":
                part["input"] = _as_object(chunk.get("input"))
            part.pop("errorText", None)
            if kind == "tool-input-error":
                part["errorText"] = chunk.get("errorText")
            if at is None:
                self._tools[call] = len(self.parts)
                self.parts.append(part)
            else:
                self.parts[at] = part
            return
        if at is None:
            return
        part = dict(self.parts[at])
        if kind == "tool-input-delta":
            if part.get("state") != "input-streaming":
                return
            if chunk.get("input") is None:
                part.pop("input", None)
            else:
                part["input"] = chunk["input"]
        elif kind == "tool-output-available":
            part.update(state="output-available", output=chunk.get("output"))
        elif kind == "tool-output-error":
            part.update(state="output-error", errorText=chunk.get("errorText"))
        else:
            return
        self.parts[at] = part

    def _data(self, kind: str, chunk: Mapping[str, Any]) -> None:
        if chunk.get("transient") is True:
            return
        ident = chunk.get("id")
        if ident is not None:
            for n, part in enumerate(self.parts):
                if part.get("type") == kind and part.get("id") == ident:
                    self.parts[n] = {**part, "data": chunk.get("data")}
                    return
        self.parts.append({"type": kind, "id": ident, "data": chunk.get("data")})


def _as_object(raw: Any) -> Any:
    """A tool input as a part holds it: a JSON object (from a string that spells one, too)."""
    if isinstance(raw, str) and raw.strip().startswith("{"):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seq(milestone: tuple[Any, Any]) -> Any:
    return milestone[1]
