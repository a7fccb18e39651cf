"""Chat hosts as agent-tool parents: the serialized delivery slot and the recovery credit.

A detached run's terminal is delivered by the warm fast path or a backbone tick, which may fire
while a chat turn streams. On a chat host those deliveries (`_run_serialized_delivery`) are put
on the chat turn queue under a keep-alive, so their handlers run strictly between turns (spec
agent-tools §4.11, T-73); while one runs, `in_delivery_slot(agent)` is true in its task, which is
how AIChatAgent-like notify hooks know to run their reply turn inline, inside the slot. The
host-specific notify and milestone hooks are in `agents_core.chat.notify_inject`.

Parent credit (§7.8): every forward of child chunks calls `_on_agent_tool_stream_progress`; a
chat host turns that into a bump of its durable chat-recovery progress record (KV
`cf:chat-recovery:progress`, `{count, at}`) at most once per 5 s per isolate, the first call
after a restart always crediting, so an orchestrating parent whose child streams shows progress.
The host's own turns bump it too, as they store chunks (the SDK's `shouldCreditStreamProgress`):
a chunk that starts a text or reasoning segment or settles a tool always, a streaming delta at
most once per 5 s per isolate. Chat recovery's no-progress window reads the count.

`RecoveryCredit` is the component that owns the count and its throttles; the slot is the
functions below, which `ChatHost` calls from its `_run_serialized_delivery` override.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.chat.turns import ChatTurns
    from agents_core.context import AgentContext

__all__ = [
    "AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS",
    "CHAT_RECOVERY_PROGRESS_KEY",
    "RecoveryCredit",
    "in_delivery_slot",
    "outside_delivery_slot",
    "run_serialized_delivery",
    "spawn_outside_delivery_slot",
]

AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS = 5_000
CHAT_STREAM_PROGRESS_CREDIT_THROTTLE_MS = 5_000
PROGRESS_CHUNK_TYPES = frozenset(
    {
        "text-start",
        "reasoning-start",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "tool-output-denied",
    }
)
"""Stored chunks that always credit progress (a segment started, a tool input or output settled)."""
STREAMING_CONTENT_CHUNK_TYPES = frozenset({"text-delta", "reasoning-delta", "tool-input-delta"})
"""Stored chunks that credit progress through the 5 s throttle."""
CHAT_RECOVERY_PROGRESS_KEY = "cf:chat-recovery:progress"
"""KV key of the parent's recovery progress record, `{"count": n, "at": ms}`."""


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


class RecoveryCredit:
    """The durable progress count chat recovery's no-progress window reads, and the credit of
    stored chunks and of a child's forwarded stream that raises it (throttled per isolate)."""

    __slots__ = ("_ctx", "_child_credited_at", "_content_credited_at")

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx
        self._child_credited_at: int | None = None
        self._content_credited_at: int | None = None

    def child_streamed(self) -> None:
        """A forward of an agent-tool child's chunks: credit at most once per 5 s."""
        now = self._ctx.host.clock.now_ms()
        last = self._child_credited_at
        if last is not None and now - last < AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS:
            return
        self._child_credited_at = now
        self.bump()

    def stored_chunk(self, chunk_type: Any) -> None:
        """A turn stored a chunk of this type: credit progress if it is new content."""
        if chunk_type in PROGRESS_CHUNK_TYPES:
            self.bump()
        elif chunk_type in STREAMING_CONTENT_CHUNK_TYPES:
            now = self._ctx.host.clock.now_ms()
            last = self._content_credited_at
            if last is not None and now - last < CHAT_STREAM_PROGRESS_CREDIT_THROTTLE_MS:
                return
            self._content_credited_at = now
            self.bump()

    def bump(self) -> None:
        host = self._ctx.host
        now = host.clock.now_ms()
        host.kv.put(CHAT_RECOVERY_PROGRESS_KEY, {"count": self.count() + 1, "at": now})

    def count(self) -> int:
        """The durable progress count (0 before the first credit)."""
        record = self._ctx.host.kv.get(CHAT_RECOVERY_PROGRESS_KEY)
        count = record.get("count", 0) if isinstance(record, dict) else 0
        return count if isinstance(count, int) else 0


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
