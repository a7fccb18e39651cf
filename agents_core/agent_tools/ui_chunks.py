"""The UI-message chunk builder: folds one AI SDK `UIMessageChunk` into a message's `parts`.

A child's turn streams chunks (`text-delta`, `tool-output-available`, `data-*`, ...); the parent
forwards them as opaque JSON text, and a client rebuilds the child's timeline by folding each
chunk into a list of UI parts (plain dicts in the AI SDK's shape). `apply_chunk` is that fold,
pure: it returns a new list and never changes the list, the parts or the chunk it is given.

What each chunk type does to `parts`:

* `text-start` appends `{type: "text", text: "", state: "streaming"}`; `text-delta {delta}`
  appends `delta` to the latest text part, or starts one with it when there is none; `text-end`
  sets the latest text part's `state` to `"done"`. The `reasoning-*` triple does the same with
  `type: "reasoning"`. Which part a delta extends is the latest of its type, not the one its
  `id` names: the SDK's builder (`applyChunkToParts`) keeps no ids, and the spec leaves it to
  that code.
* `tool-input-start {toolCallId, toolName}` appends one `tool-<toolName>` part per `toolCallId`,
  `state: "input-streaming"`, `input: None` (a second start for the same call is a provider
  replay and changes nothing). `tool-input-delta` sets `input` to the chunk's own `input` (None
  when it has none, as the AI SDK's deltas do) while the part's input streams.
  `tool-input-available {toolCallId, toolName, input}` moves the part to `input-available`
  (creating it if needed); `tool-input-error` and `tool-output-error {toolCallId, errorText}` set
  `output-error`; `tool-output-available {toolCallId, output}` sets `output-available`. An input
  is kept as an object: a string holding a JSON object is parsed, anything else becomes `{}`.
  Input chunks for a part that has moved past `input-streaming` are provider replays and change
  nothing (the SDK's first-write-wins guard); an output or a delta for a call with no part
  changes nothing either.
* `data-*` chunks: `transient: true` ones are signals, not content, and add nothing; others
  replace the `data` of an existing part with the same `type` and `id`, or are appended as
  `{type, id?, data}`.
* `start-step` (or `step-start`) appends `{type: "step-start"}`; `file` (its `mediaType` and
  `url`), `source-url` and `source-document` append a part of their own type.
* `start`, `finish`, `message-metadata`, `abort`, `finish-step` and `error` leave `parts` as they
  are: they carry the message's id, metadata or finish reason, or a step boundary, not content. A
  run's failure reaches a client as the run's own `error` event, not as a part.
* Any other type (a chunk this builder does not know) leaves `parts` as they are.

A malformed chunk (not an object, no string `type`, a required field missing or of the wrong
type) raises `MalformedChunk`, a `ValueError`.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MalformedChunk", "Part", "apply_chunk", "parts_text"]

Part = dict[str, Any]
"""One UI message part, a JSON object in the AI SDK's shape (`{"type": "text", ...}`)."""

_SOURCE_FIELDS = {
    "file": ("mediaType", "url"),
    "source-url": ("sourceId", "url", "title", "providerMetadata"),
    "source-document": ("sourceId", "mediaType", "title", "filename", "providerMetadata"),
}


class MalformedChunk(ValueError):
    """A UI chunk that cannot be applied: the message names the chunk, the field and the fix."""


def apply_chunk(parts: Sequence[Part], chunk: Mapping[str, Any]) -> list[Part]:
    """The parts after `chunk` (a new list; `parts` and `chunk` are left untouched)."""
    if not isinstance(chunk, Mapping):
        raise MalformedChunk(
            f"a UI chunk must be a JSON object with a string 'type'; got {chunk!r}"
        )
    kind = chunk.get("type")
    if not isinstance(kind, str):
        raise MalformedChunk(f"a UI chunk needs a string 'type' (e.g. 'text-delta'); got {chunk!r}")
    out = list(parts)
    if kind in ("text-start", "reasoning-start"):
        _streaming_start(out, chunk, kind.split("-")[0])
    elif kind in ("text-delta", "reasoning-delta"):
        _streaming_delta(out, chunk, kind.split("-")[0])
    elif kind in ("text-end", "reasoning-end"):
        _streaming_end(out, chunk, kind.split("-")[0])
    elif kind.startswith("tool-"):
        _tool_chunk(out, chunk, kind)
    elif kind.startswith("data-"):
        _data_chunk(out, chunk, kind)
    elif kind in ("start-step", "step-start"):
        out.append({"type": "step-start"})
    elif kind in _SOURCE_FIELDS:
        part: Part = {"type": kind}
        part.update({k: _copied(chunk[k]) for k in _SOURCE_FIELDS[kind] if k in chunk})
        out.append(part)
    elif kind == "error" and not isinstance(chunk.get("errorText"), str):
        raise MalformedChunk(f"an 'error' chunk needs a string 'errorText'; got {chunk!r}")
    # start, finish, message-metadata, abort, finish-step, error and unknown types: no change
    return out


def parts_text(parts: Sequence[Part]) -> str:
    """The run's visible text: every `text` part's text, in order, joined with nothing."""
    return "".join(p.get("text", "") for p in parts if p.get("type") == "text")


# --- text and reasoning ---------------------------------------------------------------------


def _streaming_start(out: list[Part], chunk: Mapping[str, Any], part_type: str) -> None:
    out.append({"type": part_type, "text": "", "state": "streaming"})


def _streaming_delta(out: list[Part], chunk: Mapping[str, Any], part_type: str) -> None:
    delta = _string(chunk, "delta") if chunk.get("delta") is not None else ""
    index = _find(out, lambda p: p.get("type") == part_type)
    if index is None:
        out.append({"type": part_type, "text": delta, "state": "streaming"})
        return
    part = dict(out[index])
    part["text"] = part.get("text", "") + delta
    out[index] = part


def _streaming_end(out: list[Part], chunk: Mapping[str, Any], part_type: str) -> None:
    index = _find(out, lambda p: p.get("type") == part_type)
    if index is not None and "state" in out[index]:
        out[index] = {**out[index], "state": "done"}


# --- tool calls -----------------------------------------------------------------------------


def _tool_chunk(out: list[Part], chunk: Mapping[str, Any], kind: str) -> None:
    if kind not in _TOOL_HANDLERS:
        return  # a tool chunk this builder does not know (approval flows, ...)
    call_id = _string(chunk, "toolCallId")
    index = _find(out, lambda p: p.get("toolCallId") == call_id)
    _TOOL_HANDLERS[kind](out, chunk, call_id, index)


def _tool_input_start(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    name = _string(chunk, "toolName")
    if index is not None:
        return  # a replayed start must not reset a part that has moved on
    part: Part = {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name}
    part.update(state="input-streaming", input=None)
    _copy_optional(part, chunk, "providerExecuted", "title")
    out.append(part)


def _tool_input_delta(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    if index is None or out[index].get("state") != "input-streaming":
        return
    out[index] = {**out[index], "input": _copied(chunk.get("input"))}


def _tool_input_available(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    name = _string(chunk, "toolName")
    if index is None:
        part: Part = {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name}
        part.update(state="input-available", input=_tool_input(chunk))
        _copy_optional(part, chunk, "providerExecuted", "title")
        out.append(part)
        return
    if out[index].get("state") != "input-streaming":
        return
    part = dict(out[index])
    part.update(state="input-available", input=_tool_input(chunk))
    _copy_optional(part, chunk, "providerExecuted", "title")
    out[index] = part


def _tool_input_error(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    error_text = _string(chunk, "errorText")
    if index is None:
        name = _string(chunk, "toolName")
        part: Part = {"type": f"tool-{name}", "toolCallId": call_id, "toolName": name}
    elif out[index].get("state") in ("output-available", "output-error"):
        return  # first write wins once the call has an outcome
    else:
        part = dict(out[index])
    part.update(state="output-error", input=_tool_input(chunk), errorText=error_text)
    if index is None:
        out.append(part)
    else:
        out[index] = part


def _tool_output_available(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    if "output" not in chunk:
        raise MalformedChunk(f"'tool-output-available' needs an 'output'; got {dict(chunk)!r}")
    if index is None:
        return
    part = dict(out[index])
    part.update(state="output-available", output=_copied(chunk["output"]))
    _copy_optional(part, chunk, "preliminary")
    out[index] = part


def _tool_output_error(
    out: list[Part], chunk: Mapping[str, Any], call_id: str, index: int | None
) -> None:
    error_text = _string(chunk, "errorText")
    if index is None:
        return
    part = dict(out[index])
    part.update(state="output-error", errorText=error_text)
    out[index] = part


_TOOL_HANDLERS = {
    "tool-input-start": _tool_input_start,
    "tool-input-delta": _tool_input_delta,
    "tool-input-available": _tool_input_available,
    "tool-input-error": _tool_input_error,
    "tool-output-available": _tool_output_available,
    "tool-output-error": _tool_output_error,
}


def _tool_input(chunk: Mapping[str, Any]) -> Any:
    """A tool call's input as a part keeps it: an object; a string of a JSON object, parsed;
    anything else, `{}`."""
    raw = chunk.get("input")
    if isinstance(raw, str) and raw.strip().startswith("{"):
        with contextlib.suppress(ValueError):
            raw = json.loads(raw)
    return _copied(raw) if isinstance(raw, dict) else {}


# --- data parts -----------------------------------------------------------------------------


def _data_chunk(out: list[Part], chunk: Mapping[str, Any], kind: str) -> None:
    if chunk.get("transient") is True:
        return
    part_id = chunk.get("id")
    if part_id is not None and not isinstance(part_id, str):
        raise MalformedChunk(f"a '{kind}' chunk's 'id' must be a string; got {part_id!r}")
    data = _copied(chunk.get("data"))
    if part_id is not None:
        index = _find(out, lambda p: p.get("type") == kind and p.get("id") == part_id)
        if index is not None:
            out[index] = {**out[index], "data": data}
            return
    part: Part = {"type": kind}
    if part_id is not None:
        part["id"] = part_id
    part["data"] = data
    out.append(part)


# --- helpers --------------------------------------------------------------------------------


def _find(parts: list[Part], match: Any) -> int | None:
    """The index of the latest part that matches (the one a stream is still writing)."""
    for index in range(len(parts) - 1, -1, -1):
        if match(parts[index]):
            return index
    return None


def _string(chunk: Mapping[str, Any], field: str) -> str:
    value = chunk.get(field)
    if not isinstance(value, str):
        raise MalformedChunk(
            f"a '{chunk.get('type')}' chunk needs a string '{field}'; "
            f"got {value!r} in {dict(chunk)!r}"
        )
    return value


def _copy_optional(part: Part, chunk: Mapping[str, Any], *fields: str) -> None:
    for field in fields:
        if chunk.get(field) is not None:
            part[field] = _copied(chunk[field])


def _copied(value: Any) -> Any:
    """A private copy, so a caller mutating its chunk later cannot reach into our parts."""
    return copy.deepcopy(value)
