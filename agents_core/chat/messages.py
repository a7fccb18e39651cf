"""UI messages: the transcript table, message helpers, and the builder that applies UI chunks.

A message is the AI SDK's UI message, `{"id", "role", "parts": [...]}`, stored as JSON text in
`cf_ai_chat_agent_messages` in the order it was first saved (an update keeps its place). The
`MessageBuilder` turns a stream of UI chunks into an assistant message the way the client's
builder does: text deltas append to their text part, tool chunks create and settle tool parts,
non-transient `data-*` chunks append a part (or update the one with the same type and id).
The turn engine builds its live assistant message with it, and chat recovery rebuilds an
interrupted one from the stored chunks.

`ChatMessages` is the component that owns the transcript table and sees the agent through its
`AgentContext` only; the SDK's counterpart is the hosts' `this.messages` with `persistMessages`
(AIChatAgent) and Think's session history.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents_core.jsontext import to_json_text

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["MESSAGES_DDL", "ChatMessages", "MessageBuilder", "message_text", "user_message"]

MESSAGES_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_agent_messages ("
    "id TEXT PRIMARY KEY NOT NULL, message TEXT NOT NULL, created_at INTEGER NOT NULL)"
)


def user_message(text: str, message_id: str) -> dict[str, Any]:
    """A user message with one text part."""
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def message_text(message: Mapping[str, Any], separator: str = "") -> str:
    """The message's text parts joined with `separator`."""
    parts = message.get("parts") or []
    return separator.join(
        p.get("text", "") for p in parts if isinstance(p, Mapping) and p.get("type") == "text"
    )


class MessageBuilder:
    """Applies UI chunks to one message (a copy of `message`, kept in `self.message`)."""

    def __init__(self, message: Mapping[str, Any]) -> None:
        self.message: dict[str, Any] = copy.deepcopy(dict(message))
        self.message.setdefault("parts", [])
        self._text_parts: dict[str, dict[str, Any]] = {}

    @property
    def parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = self.message["parts"]
        return parts

    def apply(self, chunk: Mapping[str, Any]) -> None:
        kind = chunk.get("type")
        if not isinstance(kind, str):
            return
        if kind == "start":
            if isinstance(chunk.get("messageId"), str) and not self.message.get("id"):
                self.message["id"] = chunk["messageId"]
        elif kind == "text-start":
            started: dict[str, Any] = {"type": "text", "text": "", "state": "streaming"}
            self.parts.append(started)
            self._text_parts[str(chunk.get("id"))] = started
        elif kind == "text-delta":
            part = self._text_parts.get(str(chunk.get("id")))
            if part is None:
                part = {"type": "text", "text": "", "state": "streaming"}
                self.parts.append(part)
                self._text_parts[str(chunk.get("id"))] = part
            part["text"] += str(chunk.get("delta", ""))
        elif kind == "text-end":
            part = self._text_parts.get(str(chunk.get("id")))
            if part is not None:
                part["state"] = "done"
        elif kind == "tool-input-available":
            self._tool_part(chunk).update(state="input-available", input=chunk.get("input"))
        elif kind == "tool-output-available":
            self._tool_part(chunk).update(state="output-available", output=chunk.get("output"))
        elif kind == "tool-output-error":
            self._tool_part(chunk).update(state="output-error", errorText=chunk.get("errorText"))
        elif kind.startswith("data-") and not chunk.get("transient"):
            self._data_part(kind, chunk)

    def _tool_part(self, chunk: Mapping[str, Any]) -> dict[str, Any]:
        call_id = chunk.get("toolCallId")
        for part in self.parts:
            if part.get("toolCallId") == call_id and str(part.get("type", "")).startswith("tool-"):
                return part
        part = {"type": f"tool-{chunk.get('toolName', 'unknown')}", "toolCallId": call_id}
        self.parts.append(part)
        return part

    def _data_part(self, kind: str, chunk: Mapping[str, Any]) -> None:
        part: dict[str, Any] = {"type": kind, "data": copy.deepcopy(chunk.get("data"))}
        if "id" in chunk:
            part["id"] = chunk["id"]
            for index, existing in enumerate(self.parts):
                if existing.get("type") == kind and existing.get("id") == chunk["id"]:
                    self.parts[index] = part
                    return
        self.parts.append(part)

    def pending_tool_calls(self) -> list[dict[str, Any]]:
        """Tool calls that never got a result (a turn interrupted while its tools ran), as
        `tool-input-available` chunks."""
        return [
            {
                "type": "tool-input-available",
                "toolCallId": p.get("toolCallId"),
                "toolName": str(p["type"])[len("tool-") :],
                "input": p.get("input"),
            }
            for p in self.parts
            if str(p.get("type", "")).startswith("tool-") and p.get("state") == "input-available"
        ]


class ChatMessages:
    """The transcript: load, save (insert or update in place) and clear."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: AgentContext) -> None:
        self._ctx = ctx
        ctx.host.sql.execute(MESSAGES_DDL)

    def all(self) -> list[dict[str, Any]]:
        """The persisted transcript, oldest first."""
        return [row["message"] for row in self.rows()]

    def rows(self) -> list[dict[str, Any]]:
        """Rows as {"id", "message" (parsed), "created_at"}, in transcript order."""
        rows = self._ctx.sql(
            "SELECT id, message, created_at FROM cf_ai_chat_agent_messages ORDER BY rowid"
        )
        return [
            {"id": r["id"], "message": json.loads(r["message"]), "created_at": r["created_at"]}
            for r in rows
        ]

    def created_since(self, started_at: int) -> list[dict[str, Any]]:
        """The messages first saved at or after `started_at`, oldest first."""
        return [r["message"] for r in self.rows() if r["created_at"] >= started_at]

    def by_id(self, message_id: str) -> dict[str, Any] | None:
        rows = self._ctx.sql(
            "SELECT message FROM cf_ai_chat_agent_messages WHERE id = ?", message_id
        )
        return json.loads(rows[0]["message"]) if rows else None

    def last_assistant(self) -> dict[str, Any] | None:
        """The transcript's last assistant message (the one a continuation extends)."""
        for message in reversed(self.all()):
            if message.get("role") == "assistant":
                return dict(message)
        return None

    def awaits_client_interaction(self) -> bool:
        """The transcript holds a part waiting on the client: a tool call asking for approval
        (the port's tools all run on the server, so no other part can wait on a client)."""
        return any(
            message.get("role") == "assistant"
            and any(
                isinstance(part, dict) and part.get("state") == "approval-requested"
                for part in message.get("parts") or []
            )
            for message in self.all()
        )

    def persist(self, message: Mapping[str, Any]) -> None:
        """Save one message: update it in place, or append it."""
        ctx = self._ctx
        text = to_json_text(message, "a chat message")
        changed = ctx.host.sql.execute(
            "UPDATE cf_ai_chat_agent_messages SET message = ? WHERE id = ?", (text, message["id"])
        )
        if not changed:
            ctx.sql(
                "INSERT INTO cf_ai_chat_agent_messages (id, message, created_at) VALUES (?, ?, ?)",
                message["id"],
                text,
                ctx.host.clock.now_ms(),
            )

    def clear(self) -> None:
        """Forget every message."""
        self._ctx.sql("DELETE FROM cf_ai_chat_agent_messages")

    def check(self, messages: Sequence[Any]) -> list[dict[str, Any]]:
        """Copies of `messages`, each given an id if it has none; misuse is named."""
        if isinstance(messages, Mapping | str) or not isinstance(messages, Sequence):
            raise TypeError(
                f"save_messages takes a list of UI messages such as "
                f'[{{"role": "user", "parts": [{{"type": "text", "text": "hi"}}]}}], '
                f"got {messages!r}"
            )
        out = []
        for message in messages:
            if not isinstance(message, Mapping) or message.get("role") not in (
                "user",
                "assistant",
                "system",
            ):
                raise TypeError(
                    f"a UI message is a mapping with role user/assistant/system and parts, "
                    f"got {message!r}"
                )
            copied = copy.deepcopy(dict(message))
            copied.setdefault("parts", [])
            if not copied.get("id"):
                copied["id"] = self._ctx.host.entropy.nanoid()
            out.append(copied)
        return out
