"""`RecoveryCredit`: the durable progress count chat recovery's no-progress window reads.

The count lives in KV `cf:chat-recovery:progress` as `{count, at}`. A chat host's own turns
raise it as they store chunks (the SDK's `shouldCreditStreamProgress`): a chunk that starts a
text or reasoning segment or settles a tool always, a streaming delta at most once per 5 s per
isolate. A chat host that is an agent-tool parent raises it too, at most once per 5 s per
isolate, whenever it forwards its child's chunks (spec agent-tools §7.8; the first call after a
restart always credits), so an orchestrating parent whose child streams shows progress.
`ChatRecovery` reads the count when it claims an interrupted turn and before each attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "AGENT_TOOL_STREAM_PROGRESS_BUMP_THROTTLE_MS",
    "CHAT_RECOVERY_PROGRESS_KEY",
    "RecoveryCredit",
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
