"""`ThinkWorkload` / `AiChatWorkload`: a chat host a scenario talks to, described in YAML.

`say(text)` sends `text` as a user message and runs the turn: the host streams the answer from
its model service (`model` — the scenario's `model:` section — or `model/<alias>` when the
workload has a `model:` of its own), stores and broadcasts every chunk, and persists the answer.
When the turn ends it emits `workload:answered {requestId, status, text}` (the last assistant
message's text) and returns the same. Clients may also send chat requests themselves
(`send: {client, message: {type: cf_agent_use_chat_request, messages: [...]}}`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents_core.chat import ChatAgent, ThinkAgent
from agents_core.chat.messages import message_text, user_message
from scenarios.language.schema import MODEL_SERVICE
from scenarios.workloads.plans import one_of
from scenarios.workloads.self_types import ChatWorkloadSelf

__all__ = ["CHAT_HOSTS", "AiChatWorkload", "ThinkWorkload", "chat_workload"]


class _SayMixin:
    async def say(self: ChatWorkloadSelf, text: str) -> dict[str, Any]:
        """Send `text` as the user and run the turn; `{requestId, status, error?, text}`, the
        text being that of the assistant message the turn persisted ('' when none)."""
        before = len(self.messages)
        result = await self.save_messages([user_message(text, self.host.entropy.nanoid())])
        answers = [m for m in self.messages[before:] if m.get("role") == "assistant"]
        answer = message_text(answers[-1]) if answers else ""
        self.host.trace.emit(
            "workload:answered",
            requestId=result["requestId"],
            status=result["status"],
            text=answer,
        )
        return {**result, "text": answer}


class ThinkWorkload(_SayMixin, ThinkAgent):
    """A Think-like chat host that answers `say` from its model service."""

    model_service: ClassVar[str] = MODEL_SERVICE


class AiChatWorkload(_SayMixin, ChatAgent):
    """An AIChatAgent-like chat host that answers `say` from its model service."""

    model_service: ClassVar[str] = MODEL_SERVICE


CHAT_HOSTS: dict[str, type] = {"think": ThinkWorkload, "chat": AiChatWorkload}
"""The `host:` of a chat workload, to its base class."""


def chat_workload(host: str = "think", *, model_service: str = MODEL_SERVICE) -> type:
    """A subclass of the `host`'s class (same name) streaming from `model_service`."""
    one_of("host", host, list(CHAT_HOSTS))
    base = CHAT_HOSTS[host]
    attributes = {
        "model_service": model_service,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "__doc__": base.__doc__,
    }
    return type(base.__name__, (base,), attributes)
