"""The `detached` option of `run_agent_tool` and the row columns it sets (spec agent-tools §4.2).

`parse_detached_option` turns the option into a `DetachedConfig`, or None for an awaited run, and
refuses a bad one before any row is written: an `on_finish` that is not the NAME of a method of
the agent (a closure cannot be rehydrated after an eviction), an unknown key, a budget that is
not a number. `detached_columns` gives the columns of the run's row, with the agent's options as
the budgets' defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.jsontext import to_json_text
from agents_core.stored_names import DETACHED_NOTIFY_CALLBACK, callback_method

if TYPE_CHECKING:
    from agents_core.options import AgentOptions

__all__ = ["DETACHED_OPTION_KEYS", "DetachedConfig", "detached_columns", "parse_detached_option"]

DETACHED_OPTION_KEYS = (
    "on_finish",
    "notify",
    "max_budget_ms",
    "no_progress_budget_ms",
    "on_milestones",
)


@dataclass(frozen=True)
class DetachedConfig:
    """The parsed `detached` option of one dispatch."""

    on_finish: str | None = None
    """The method name stored as the run's callback (the notify hook under `notify`)."""
    notify_source: str | None = None
    max_budget_ms: float | None = None
    no_progress_budget_ms: float | None = None
    on_milestones: dict[str, Any] | None = None
    """`{"names": [...], "mode": "narrate" | "react"}`."""


def _budget(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidArgument(
            f"run_agent_tool: detached.{field} must be a number of milliseconds (0 or "
            f"float('inf') allowed), got {value!r}"
        )
    return value


def _milestones(raw: Any) -> dict[str, Any] | None:
    if not raw:
        return None
    names: Any
    if isinstance(raw, list | tuple):
        names, mode = list(raw), "narrate"
    elif isinstance(raw, Mapping):
        names, mode = raw.get("names"), raw.get("mode") or "narrate"
        unknown = sorted(set(raw) - {"names", "mode"})
        if unknown:
            raise InvalidArgument(
                f"run_agent_tool: detached.on_milestones takes 'names' and 'mode', got {unknown}"
            )
    else:
        raise InvalidArgument(
            "run_agent_tool: detached.on_milestones must be a list of milestone names or "
            f"{{'names': [...], 'mode': 'narrate' | 'react'}}, got {raw!r}"
        )
    if mode not in ("narrate", "react"):
        raise InvalidArgument(
            "run_agent_tool: detached.on_milestones mode must be 'narrate' or 'react', "
            f"got {mode!r}"
        )
    if names is not None and not all(isinstance(n, str) for n in names):
        raise InvalidArgument(
            f"run_agent_tool: detached.on_milestones names must be strings, got {names!r}"
        )
    return {"names": list(names), "mode": mode} if names else None


def parse_detached_option(agent: object, detached: Any) -> DetachedConfig | None:
    """None for an awaited run (None or False); True or any mapping, even an empty one (a
    JavaScript object is truthy), is detached. Raises before any row is written when
    `on_finish` does not name a method of this agent."""
    if detached is None or detached is False:
        return None
    if detached is True:
        return DetachedConfig()
    if not isinstance(detached, Mapping):
        raise InvalidArgument(
            "run_agent_tool: detached must be True or a mapping with the keys "
            f"{list(DETACHED_OPTION_KEYS)}, got {detached!r}"
        )
    unknown = sorted(set(detached) - set(DETACHED_OPTION_KEYS))
    if unknown:
        raise InvalidArgument(
            f"run_agent_tool: unknown detached option(s) {unknown}; known: "
            f"{list(DETACHED_OPTION_KEYS)}"
        )
    cls_name = type(agent).__name__
    on_finish = detached.get("on_finish")
    if on_finish is not None and not isinstance(on_finish, str):
        raise InvalidArgument(
            f"run_agent_tool: detached.on_finish must be the NAME of a method on {cls_name}, "
            f"not {on_finish!r}: closures cannot be rehydrated after the Durable Object is "
            "evicted."
        )
    if on_finish is not None and callback_method(agent, on_finish) is None:
        raise InvalidArgument(
            f'run_agent_tool: detached.on_finish "{on_finish}" is not a method on {cls_name}. '
            'Pass the NAME of a method (e.g. "on_import_done"), not a closure — closures '
            "cannot be rehydrated after the Durable Object is evicted."
        )
    notify = detached.get("notify")
    if notify is not None and not isinstance(notify, bool | Mapping):
        raise InvalidArgument(
            f"run_agent_tool: detached.notify must be True or {{'source': ...}}, got {notify!r}"
        )
    source = notify.get("source") if isinstance(notify, Mapping) else None
    if on_finish is None and notify and callback_method(agent, DETACHED_NOTIFY_CALLBACK):
        on_finish = DETACHED_NOTIFY_CALLBACK
    return DetachedConfig(
        on_finish=on_finish,
        notify_source=source,
        max_budget_ms=_budget(detached.get("max_budget_ms"), "max_budget_ms"),
        no_progress_budget_ms=_budget(
            detached.get("no_progress_budget_ms"), "no_progress_budget_ms"
        ),
        on_milestones=_milestones(detached.get("on_milestones")),
    )


def detached_columns(
    config: DetachedConfig, started_at: int, options: AgentOptions
) -> dict[str, Any]:
    max_budget = config.max_budget_ms
    if max_budget is None:
        max_budget = options.detached_max_budget_ms
    window = config.no_progress_budget_ms
    if window is None:
        window = options.detached_no_progress_budget_ms
    milestones = config.on_milestones
    return {
        "detached": 1,
        "detached_on_finish": config.on_finish,
        "detached_notify_source": config.notify_source,
        # An infinite budget is stored as NULL: it never fires.
        "detached_max_budget_at": (
            started_at + math.floor(max_budget) if math.isfinite(max_budget) else None
        ),
        "detached_no_progress_budget_ms": math.floor(window) if math.isfinite(window) else None,
        "detached_on_milestones": (
            None if milestones is None else to_json_text(milestones, "on_milestones")
        ),
    }
