"""`ChatHost`: what Think-like and AIChatAgent-like agents share, assembled from the mixins.

A chat host is an `Agent` with a transcript (`messages`, the `ChatMessages` component), a
resumable stream (the `ResumableStream` component), a FIFO turn queue
whose turns are fibers streaming from the model service, chat recovery, `report_progress`, and
the agent-tool child adapter with its tail and broadcast snoop, and the parent side's serialized
deliveries and recovery credit (`parent.py`). `ThinkAgent` and `ChatAgent`
subclass it and differ only where the SDK's two hosts differ (spec agent-tools §11 E25).
"""

from __future__ import annotations

from typing import Any

from agents_core.agent import Agent
from agents_core.chat.chat_recovery import ChatRecoveryMixin
from agents_core.chat.child_runs import AgentToolChildMixin
from agents_core.chat.messages import ChatMessages
from agents_core.chat.parent import ChatParentMixin
from agents_core.chat.progress import ProgressMixin
from agents_core.chat.stream_store import ResumableStream
from agents_core.chat.tails import AgentToolTailsMixin
from agents_core.chat.turns import ChatTurnsMixin
from agents_core.host import Host

__all__ = ["ChatHost"]


class ChatHost(
    AgentToolTailsMixin,
    AgentToolChildMixin,
    ProgressMixin,
    ChatRecoveryMixin,
    ChatTurnsMixin,
    ChatParentMixin,
    Agent,
):
    """The shared base of the chat hosts; subclass `ThinkAgent` or `ChatAgent`, not this."""

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        self._messages = ChatMessages(self._context)
        self._stream = ResumableStream(self._context)
        self._init_turns()
        self._init_chat_recovery()
        self._init_progress()
        self._init_agent_tool_child()
        self._init_chat_parent()

    # -- the SDK's surface ----------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The persisted transcript, oldest first."""
        return self._messages.all()

    def stream_chunks(self, stream_id: str | None, after: int = -1) -> list[dict[str, Any]]:
        """Stored chunks of a stream with index > `after`, as {"sequence", "body"}."""
        return self._stream.chunks(stream_id, after)
