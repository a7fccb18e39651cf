"""Chat hosts as agent-tool parents: the serialized delivery slot, and the recovery credit.

A detached run's terminal is delivered by the warm fast path or a backbone tick, which may fire
while a chat turn streams. On a chat host those deliveries (`_run_serialized_delivery`) are put
on the chat turn queue under a keep-alive, so their handlers run strictly between turns (spec
agent-tools §4.11, T-73); while one runs, `in_delivery_slot(agent)` is true in its task, which is
how AIChatAgent-like notify hooks know to run their reply turn inline, inside the slot. The
host-specific notify and milestone hooks are in `agents_core.chat.notify_inject`.

Parent credit (§7.8): every forward of child chunks calls `_on_agent_tool_stream_progress`,
which a chat host turns into a (throttled) bump of chat recovery's progress count.
The count and its throttles are the `RecoveryCredit` component (`recovery_credit.py`), which
`ChatHost` credits from its `_on_agent_tool_stream_progress` override; the slot is the functions
below, which it calls from its `_run_serialized_delivery` override.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from agents_core.chat.recovery_credit import (
    AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS,
    CHAT_RECOVERY_PROGRESS_KEY,
)

if TYPE_CHECKING:
    from agents_core.chat.turns import ChatTurns

__all__ = [
    "AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS",
    "CHAT_RECOVERY_PROGRESS_KEY",
    "in_delivery_slot",
    "outside_delivery_slot",
    "run_serialized_delivery",
    "spawn_outside_delivery_slot",
]


class _DeliverySlot:
    """One serialized delivery holding the turn queue; closed when it ends, so a task it spawned
    (which inherits the context variable) does not think it holds the queue too."""

    __slots__ = ("agent", "open")

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.open = True


_slot: contextvars.ContextVar[_DeliverySlot | None] = contextvars.ContextVar(
    "agents_core_chat_delivery_slot", default=None
)


async def _in_delivery_slot(agent: Any, invoke: Callable[[], Awaitable[None]]) -> None:
    """Await `invoke()` as a serialized delivery of `agent` (the caller holds the turn queue)."""
    slot = _DeliverySlot(agent)
    token = _slot.set(slot)
    closed = False
    try:
        await invoke()
    except GeneratorExit:
        # Closed after its incarnation died: restoring the variable there would leak it.
        closed = True
        raise
    finally:
        slot.open = False
        if not closed:
            _slot.reset(token)


def in_delivery_slot(agent: Any) -> bool:
    """True when the calling code runs inside a serialized delivery of `agent`."""
    slot = _slot.get()
    return slot is not None and slot.open and slot.agent is agent


async def run_serialized_delivery(
    agent: Any,
    keep_alive: Callable[[], Awaitable[Callable[[], None]]],
    turns: ChatTurns,
    invoke: Callable[[], Awaitable[None]],
) -> None:
    """A chat host's `_run_serialized_delivery`: run `invoke` on the chat turn queue, strictly
    between turns, under a keep-alive (taken with `keep_alive`, the host's, which a subclass
    may override), as a serialized delivery of `agent`."""
    dispose = await keep_alive()
    try:
        await turns.between_turns(lambda: _in_delivery_slot(agent, invoke))
    finally:
        dispose()


async def outside_delivery_slot(step: Callable[[], Awaitable[Any]]) -> Any:
    """Await `step()` with the slot marker cleared (a turn run inline in the slot)."""
    token = _slot.set(None)
    closed = False
    try:
        return await step()
    except GeneratorExit:
        closed = True
        raise
    finally:
        if not closed:
            _slot.reset(token)


def spawn_outside_delivery_slot(tasks: Any, coro: Coroutine[Any, Any, Any]) -> None:
    """`tasks.wait_until(coro)` in a context that does not inherit the slot marker."""
    token = _slot.set(None)
    try:
        tasks.wait_until(coro)
    finally:
        _slot.reset(token)
