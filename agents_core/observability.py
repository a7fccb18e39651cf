"""Observability: the SDK's events, published on named channels and recorded in the trace.

Every event is `{type, agent, name, payload, timestamp}` as the SDK emits it. The channel is
chosen by the type's prefix, as the SDK's default implementation does: `fiber:*` on `fiber`,
`schedule:*` and `queue:*` on `schedule`, `agent_tool:*` on `agentTool`, anything else on
`lifecycle`. Subscriptions are process-wide (like `diagnostics_channel`) and callbacks run
synchronously at the emit, in subscription order; a callback that raises is dropped from that
emit's delivery and never breaks the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHANNELS", "ObservabilityEvent", "channel_for", "emit", "subscribe"]

CHANNELS = {
    "fiber": "agents:fiber",
    "schedule": "agents:schedule",
    "lifecycle": "agents:lifecycle",
    "agentTool": "agents:agent_tool",
}
"""Subscription key -> channel name."""

_PREFIXES = (
    ("fiber:", "fiber"),
    ("schedule:", "schedule"),
    ("queue:", "schedule"),
    ("agent_tool:", "agentTool"),
)


@dataclass(frozen=True)
class ObservabilityEvent:
    type: str
    agent: str
    name: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    timestamp: int = 0


Subscriber = Callable[[ObservabilityEvent], None]
_subscribers: dict[str, list[Subscriber]] = {key: [] for key in CHANNELS}


def channel_for(event_type: str) -> str:
    """The subscription key an event type is published on."""
    for prefix, key in _PREFIXES:
        if event_type.startswith(prefix):
            return key
    return "lifecycle"


def subscribe(channel: str, callback: Subscriber) -> Callable[[], None]:
    """Call `callback` with every event on `channel` (a key of CHANNELS or its channel name);
    returns the function that unsubscribes."""
    key = channel
    if key not in CHANNELS:
        by_name = {name: k for k, name in CHANNELS.items()}
        if key not in by_name:
            raise ValueError(
                f"unknown observability channel {channel!r}; known: {sorted(CHANNELS)}"
            )
        key = by_name[key]
    _subscribers[key].append(callback)

    def unsubscribe() -> None:
        if callback in _subscribers[key]:
            _subscribers[key].remove(callback)

    return unsubscribe


def emit(agent: Any, event_type: str, payload: Mapping[str, Any]) -> ObservabilityEvent:
    """Record the event in the agent's trace and publish it on its channel."""
    host = agent.host
    event = ObservabilityEvent(
        type=event_type,
        agent=type(agent).__name__,
        name=agent.name,
        payload=dict(payload),
        timestamp=host.clock.now_ms(),
    )
    host.trace.emit(event_type, **payload)
    for callback in list(_subscribers[channel_for(event_type)]):
        try:
            callback(event)
        except Exception:  # noqa: BLE001 - an observer never breaks the runtime
            continue
    return event
