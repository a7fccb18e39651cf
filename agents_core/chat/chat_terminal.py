"""0.32.0's durable chat status for clients: the "recovering" flag and the last terminal
outcome (spec sdk-0.32 §8.1, §8.2).

- `cf:chat:recovering` (KV, `{requestId?, at}`): set when a recovery is scheduled, cleared when
  it completes, is skipped, fails or is given up. Each real change is broadcast as a
  `cf_agent_chat_recovering` frame (`{recovering, id?}`); setting it again while it is set, or
  clearing it when it is not, sends nothing. A flag older than 15 minutes is abandoned: it
  counts as not set, so it neither pins the indicator on nor keeps a new recovery from
  announcing itself. A client that connects while no turn streams gets the flag's frame.
- `cf:chat:last-terminal` (KV, `{requestId, body, messageIds?}`): the last turn that ended in an
  error, or whose recovery was given up (its body the terminal message). A turn that completes
  or is aborted clears it, and so do a new chat request and a clear of the chat. A client that
  reconnects learns it over the resume handshake (`ChatStatus.on_message`): it asks to resume
  (`cf_agent_stream_resume_request`), is told `cf_agent_stream_resuming` with the turn's id,
  acknowledges (`cf_agent_stream_resume_ack`) and receives the terminal error frame. The record
  stays, so every tab that reconnects learns it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.chat.turns import CHAT_RESPONSE_TYPE

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "CHAT_LAST_TERMINAL_KEY",
    "CHAT_RECOVERING_FLAG_TTL_MS",
    "CHAT_RECOVERING_KEY",
    "CHAT_RECOVERING_TYPE",
    "DEFAULT_TURN_ERROR",
    "ChatStatus",
]

CHAT_RECOVERING_KEY = "cf:chat:recovering"
CHAT_LAST_TERMINAL_KEY = "cf:chat:last-terminal"
CHAT_RECOVERING_FLAG_TTL_MS = 900_000
CHAT_RECOVERING_TYPE = "cf_agent_chat_recovering"
STREAM_RESUME_REQUEST_TYPE = "cf_agent_stream_resume_request"
STREAM_RESUMING_TYPE = "cf_agent_stream_resuming"
STREAM_RESUME_ACK_TYPE = "cf_agent_stream_resume_ack"
DEFAULT_TURN_ERROR = "The assistant encountered an error."
"""The terminal body of a turn that ended in an error without a message."""


class ChatStatus:
    """One chat host's recovering flag and last-terminal record (both in KV)."""

    __slots__ = ("_ctx", "_broadcast")

    def __init__(self, ctx: AgentContext, broadcast: Callable[[Any], None]) -> None:
        self._ctx = ctx
        self._broadcast = broadcast

    # -- the recovering flag ----------------------------------------------------------------
    def _live_flag(self) -> dict[str, Any] | None:
        flag = self._ctx.host.kv.get(CHAT_RECOVERING_KEY)
        if not isinstance(flag, dict):
            return None
        at = flag.get("at")
        age = self._ctx.host.clock.now_ms() - (at if isinstance(at, (int, float)) else 0)
        return flag if age < CHAT_RECOVERING_FLAG_TTL_MS else None

    def set_recovering(self, active: bool, request_id: str | None = None) -> None:
        kv = self._ctx.host.kv
        if active:
            if self._live_flag() is not None:
                return
            flag: dict[str, Any] = {"at": self._ctx.host.clock.now_ms()}
            if request_id:
                flag = {"requestId": request_id, **flag}
            kv.put(CHAT_RECOVERING_KEY, flag)
        else:
            existing = kv.get(CHAT_RECOVERING_KEY)
            if existing is None:
                return
            kv.delete(CHAT_RECOVERING_KEY)
            if request_id is None and isinstance(existing, dict):
                request_id = existing.get("requestId")
        frame: dict[str, Any] = {"type": CHAT_RECOVERING_TYPE, "recovering": active}
        if request_id:
            frame["id"] = request_id
        self._broadcast(frame)

    def recovering_frame(self) -> dict[str, Any] | None:
        """The frame a connecting client gets while a recovery is on, else None."""
        flag = self._live_flag()
        if flag is None:
            return None
        frame: dict[str, Any] = {"type": CHAT_RECOVERING_TYPE, "recovering": True}
        if flag.get("requestId"):
            frame["id"] = flag["requestId"]
        return frame

    def on_connect(self, connection: Any, streaming: bool) -> None:
        """A client connected: while no turn streams, it gets the flag's frame, if any."""
        frame = None if streaming else self.recovering_frame()
        if frame is not None:
            connection.send(frame)

    # -- the last terminal outcome ----------------------------------------------------------
    def turn_ended(self, request_id: str, status: str, error: str | None) -> None:
        """A turn ended: an error is recorded as the last terminal outcome, a completion or an
        abort clears it."""
        if status in ("completed", "aborted"):
            self.clear_terminal()
        elif status == "error":
            self.record_terminal(request_id, error or DEFAULT_TURN_ERROR)

    def record_terminal(self, request_id: str, body: str) -> None:
        self._ctx.host.kv.put(CHAT_LAST_TERMINAL_KEY, {"requestId": request_id, "body": body})

    def clear_terminal(self) -> None:
        self._ctx.host.kv.delete(CHAT_LAST_TERMINAL_KEY)

    def pending_terminal(self) -> dict[str, Any] | None:
        record = self._ctx.host.kv.get(CHAT_LAST_TERMINAL_KEY)
        return record if isinstance(record, dict) else None

    def deliver_terminal(self, request_id: str, body: str) -> None:
        """Send every client the turn's terminal error frame."""
        self._broadcast(self.terminal_frame(request_id, body))

    def terminal_frame(self, request_id: str, body: str) -> dict[str, Any]:
        return {
            "type": CHAT_RESPONSE_TYPE,
            "id": request_id,
            "body": body,
            "done": True,
            "error": True,
        }

    # -- the resume handshake's terminal replay ---------------------------------------------
    def on_message(self, connection: Any, message: Any, streaming: bool) -> bool:
        """The part of the resume handshake that replays the last terminal outcome; True when
        `message` was such a handshake frame and is answered. `streaming`: a turn streams now
        (its own resume is not modelled: the terminal is not offered then)."""
        if not isinstance(message, Mapping):
            return False
        kind = message.get("type")
        if kind == STREAM_RESUME_REQUEST_TYPE:
            pending = self.pending_terminal()
            if streaming or pending is None:
                return False
            connection.send({"type": STREAM_RESUMING_TYPE, "id": pending.get("requestId")})
            return True
        if kind == STREAM_RESUME_ACK_TYPE:
            pending = self.pending_terminal()
            if pending is None or pending.get("requestId") != message.get("id"):
                return False
            connection.send(self.terminal_frame(pending["requestId"], pending.get("body", "")))
            return True
        return False
