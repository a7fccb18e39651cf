"""What a chat client shows of its turns: which requests ended and how, which one is being
recovered, and whether the "recovering" indicator is on (spec sdk-0.32 §8.2; the bookkeeping
of the SDK's chat client hook), fed the frames one client received, in order.

- A `cf_agent_use_chat_response` frame with `error` but not `done` remembers the request's
  error; a frame that is neither done nor an error only shows the request streaming.
- A `done` frame ends its request with an outcome: `error` when it carries `error`, else its
  `outcome`, else `error` when an earlier frame of the request carried one, else `completed`.
- `recovering` ends nothing: the request stopped but recovery continues the same turn under a
  new request, so the turn stays open as the one being recovered. It stays so until a live
  frame of another request (not a replay, not `skipped`) arrives, or the server says the
  recovery stopped (`cf_agent_chat_recovering` with `recovering: false`), or the chat is
  cleared.
- A request ends at most once: a later terminal frame for it (a replay) reports nothing more.
- `cf_agent_chat_recovering` turns the indicator on or off; an error frame, a `done` frame
  whose outcome is not `recovering`, a resumed stream and a clear turn it off.

The view is the subject a test or a checker judges; it imports nothing of the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RECOVERING", "ChatTurnEnd", "ChatTurnReducer", "chat_client_view"]

RESPONSE = "cf_agent_use_chat_response"
RECOVERING_FRAME = "cf_agent_chat_recovering"
RESUMING = "cf_agent_stream_resuming"
CLEAR = "cf_agent_chat_clear"
RECOVERING = "recovering"
"""The outcome of a request whose turn recovery continues under a new request."""


@dataclass(frozen=True)
class ChatTurnEnd:
    """One request that ended, as the client reports it (never with outcome `recovering`)."""

    request_id: str
    outcome: str
    """`completed`, `error`, `aborted` or `skipped`."""
    error: str | None = None
    replay: bool = False
    message_ids: tuple[str, ...] | None = None


@dataclass
class ChatTurnReducer:
    """The client's turn bookkeeping; `receive` each frame in the order it arrived."""

    ends: list[ChatTurnEnd] = field(default_factory=list)
    streaming: list[str] = field(default_factory=list)
    """Requests seen streaming and not ended (nor being recovered), in first-seen order."""
    recovering_request_id: str | None = None
    """The request whose turn recovery continues (its `done` frame said `recovering`)."""
    is_recovering: bool = False
    """The server's "recovering" indicator."""
    _errors: dict[str, str] = field(default_factory=dict)
    _ended: set[str] = field(default_factory=set)

    @property
    def busy(self) -> bool:
        """A turn is open: streaming, being recovered, or the indicator is on."""
        return bool(self.streaming) or self.recovering_request_id is not None or self.is_recovering

    def receive(self, frame: Any) -> None:
        if not isinstance(frame, Mapping):
            return
        kind = frame.get("type")
        if kind == RECOVERING_FRAME:
            self.is_recovering = bool(frame.get("recovering"))
            if not self.is_recovering:
                self.recovering_request_id = None
        elif kind == CLEAR:
            self.streaming.clear()
            self.recovering_request_id = None
            self.is_recovering = False
        elif kind == RESUMING:
            if self.recovering_request_id not in (None, frame.get("id")):
                self.recovering_request_id = None
            self.is_recovering = False
        elif kind == RESPONSE and isinstance(frame.get("id"), str):
            self._response(frame)

    def _response(self, frame: Mapping[str, Any]) -> None:
        request_id: str = frame["id"]
        done, error = frame.get("done") is True, bool(frame.get("error"))
        if done and frame.get("outcome") == RECOVERING:
            self.recovering_request_id = request_id
        elif (
            self.recovering_request_id not in (None, request_id)
            and not frame.get("replay")
            and frame.get("outcome") != "skipped"
        ):
            self.recovering_request_id = None
        if error or (done and frame.get("outcome") != RECOVERING):
            self.is_recovering = False
        if error and not done:
            self._errors[request_id] = str(frame.get("body", ""))
            return
        if not done:
            if request_id not in self._ended and request_id not in self.streaming:
                self.streaming.append(request_id)
            return
        if request_id in self.streaming:
            self.streaming.remove(request_id)
        earlier = self._errors.pop(request_id, None)
        if error:
            outcome = "error"
        else:
            outcome = frame.get("outcome") or ("error" if earlier is not None else "completed")
        if outcome == RECOVERING or request_id in self._ended:
            return
        self._ended.add(request_id)
        ids = frame.get("messageIds")
        self.ends.append(
            ChatTurnEnd(
                request_id,
                outcome,
                error=(str(frame.get("body", "")) if error else earlier)
                if outcome == "error"
                else None,
                replay=frame.get("replay") is True,
                message_ids=tuple(ids) if isinstance(ids, list) else None,
            )
        )


def chat_client_view(frames: Iterable[Any]) -> dict[str, Any]:
    """What the client shows once every frame went through the reducer once: `ended` (each
    ended request's end, in order), `streaming`, `recovering_request_id`, `is_recovering` and
    `busy`."""
    reducer = ChatTurnReducer()
    for frame in frames:
        reducer.receive(frame)
    return {
        "ended": list(reducer.ends),
        "streaming": list(reducer.streaming),
        "recovering_request_id": reducer.recovering_request_id,
        "is_recovering": reducer.is_recovering,
        "busy": reducer.busy,
    }
