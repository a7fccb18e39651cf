"""Invariant `input_preview_derived`: a run's preview is its input, as agent-tools §2.3 cuts it.

When a run is dispatched without an explicit preview, the parent stores and broadcasts a default
one (§2.3 step 4): a string input's first 500 characters; null as it is; anything else its JSON
text, cut to 497 characters and `...` when longer than 500. The SDK is JavaScript, so a character
is a UTF-16 code unit (an emoji counts two, and a cut may keep half of one) and JSON is
`JSON.stringify`'s (a whole number is written without a fraction). The workloads record each
dispatch's input as JSON text (`workload:run_input {runId, input}`, key order kept); the
preview is read from the started frames a client is sent live and from the `input_preview`
column of the parent's final rows.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant

__all__ = ["expected_preview", "input_preview_derived"]

LIMIT = 500
"""agent-tools §2.3 (and the constants table): the preview cap, in JavaScript characters."""


def _units(text: str) -> list[int]:
    raw = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def _from_units(units: list[int]) -> str:
    raw = b"".join(unit.to_bytes(2, "big") for unit in units)
    return raw.decode("utf-16-be", "surrogatepass")


def _stringify(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "null"
        return str(int(value)) if value == int(value) and abs(value) < 1e21 else repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ",".join(_stringify(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}:{_stringify(v)}" for k, v in value.items()
        )
        return "{" + ",".join(items) + "}"
    raise TypeError(f"not JSON: {value!r}")


def expected_preview(value: Any) -> Any:
    """§2.3's default preview of an input, with JavaScript's characters and JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return _from_units(_units(value)[:LIMIT])
    text = _stringify(value)
    units = _units(text)
    if len(units) > LIMIT:
        return _from_units(units[: LIMIT - 3]) + "..."
    return text


@invariant("input_preview_derived")
def input_preview_derived(context: CheckContext) -> list[Violation]:
    """agent-tools §2.3 — a run dispatched without a preview shows its input's default preview.

    For each `workload:run_input {runId, input}`, the next live `started` frame of that run on
    any connection of that agent, and that agent's final `cf_agent_tool_runs` row of the run
    (its `input_preview` JSON text), show `expected_preview(input)`; a run dispatched again
    under its id (an idempotent re-issue) keeps the preview of its first dispatch, so only the
    first input before each started frame counts.
    """
    out: list[Violation] = []
    for agent in sorted({r.agent for r in context.events("workload:run_input")}):
        wanted: dict[str, Any] = {}  # run id -> the preview its next started frame must show
        final: dict[str, Any] = {}  # run id -> the preview its final row must show
        for record in context.records_of(agent):
            if record.event == "workload:run_input":
                run = str(record.get("runId"))
                preview = expected_preview(json.loads(str(record.get("input"))))
                wanted.setdefault(run, preview)
                final.setdefault(run, preview)
            elif record.event == "connection:frame":
                frame = record.get("frame")
                event = frame.get("event") if isinstance(frame, dict) else None
                if not isinstance(event, dict) or event.get("kind") != "started":
                    continue
                if frame.get("replay") or event.get("runId") not in wanted:
                    continue
                run = str(event.get("runId"))
                shown, want = event.get("inputPreview"), wanted.pop(run)
                if not _same(shown, want):
                    message = (
                        f"run {run} of {agent} was started with the preview {_cut(shown)}, "
                        f"where its input gives {_cut(want)}"
                    )
                    out.append(
                        Violation("input_preview_derived", agent, run, message, (record.seq,))
                    )
        for row in context.storage.get(agent, {}).get("cf_agent_tool_runs", []):
            run = str(row.get("run_id"))
            if run not in final:
                continue
            stored = row.get("input_preview")
            shown = None if stored is None else json.loads(stored)
            if not _same(shown, final[run]):
                message = (
                    f"run {run} of {agent} keeps the preview {_cut(shown)} in its row, where its "
                    f"input gives {_cut(final[run])}"
                )
                out.append(Violation("input_preview_derived", agent, run, message, ()))
    return out


def _same(shown: Any, want: Any) -> bool:
    """Equal as JavaScript sees them: strings as UTF-16 code units, so that a character outside
    the BMP and its two halves held apart are one and the same text."""
    if isinstance(shown, str) and isinstance(want, str):
        return _units(shown) == _units(want)
    return bool(shown == want)


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 90 else f"{text[:40]}...{text[-40:]} ({len(text)} chars)"
