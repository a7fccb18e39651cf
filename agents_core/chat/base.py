"""`ChatHost`: what Think-like and AIChatAgent-like agents share, assembled from the mixins.

A chat host is an `Agent` with a transcript (`messages`), a resumable stream, a FIFO turn queue
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
from agents_core.chat.messages import MessagesMixin
from agents_core.chat.parent import ChatParentMixin
from agents_core.chat.progress import ProgressMixin
from agents_core.chat.stream_store import StreamStoreMixin
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
    StreamStoreMixin,
    MessagesMixin,
    ChatParentMixin,
    Agent,
):
    """The shared base of the chat hosts; subclass `ThinkAgent` or `ChatAgent`, not this."""

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        self._init_messages()
        self._init_stream_store()
        self._init_turns()
        self._init_chat_recovery()
        self._init_progress()
        self._init_agent_tool_child()
        self._init_chat_parent()

    def _messages_created_since(self, started_at: int) -> list[dict[str, Any]]:
        return [r["message"] for r in self._message_rows() if r["created_at"] >= started_at]
