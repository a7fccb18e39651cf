"""The steps inside one chat turn: the model calls and the tool runs, and the frames they send.

`TurnSteps.drive` streams from `model_service`, stores each UI chunk in the turn's resumable
stream and broadcasts it as a `cf_agent_use_chat_response` frame; when the model calls tools it
runs them (in parallel, each result streamed as it lands), appends the results and calls the
model again, until the model answers without tools (at most `max_steps` model calls). The
answer's `finish` chunk commits in a step of its own. A model failure, in-band or raised,
becomes one error frame (`error: true`, body = the message). With a stall window (0.32.0's
`chat_stream_stall_timeout_ms`), a turn whose UI stream shows nothing for that long (a model
read waiting, or a tool call running, spec sdk-0.32 §8.2) ends its steps as `stalled`; on
0.32.0 a platform-transient read error of the model stream ends them as `interrupted`, its
error frame left to chat recovery's verdict, and the frames of a continuation turn say
`continuation: true` (`stream_watchdog.py`). The queue that runs the turn, and what happens
after its steps, is `turns.py`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agents_core.chat.stream_watchdog import (
    PLAIN_READING,
    StallWatchdog,
    StreamReading,
    is_recoverable_stream_read_error,
)
from agents_core.chat.turn_types import ABORTED, CHAT_RESPONSE_TYPE, END, STALLED
from agents_core.jsontext import to_json_text

if TYPE_CHECKING:
    from agents_core.chat.messages import ChatMessages
    from agents_core.chat.recovery_credit import RecoveryCredit
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.chat.turn_types import TurnHooks, TurnState
    from agents_core.context import AgentContext
    from agents_core.signals import AbortSignal

__all__ = ["TurnSteps", "error_message"]


class TurnSteps:
    """The model and tool steps of a chat host's turns, and the chunks they store and send."""

    __slots__ = ("_ctx", "_messages", "_stream", "_credit", "_hooks", "_reading")

    def __init__(
        self,
        ctx: AgentContext,
        messages: ChatMessages,
        stream: ResumableStream,
        credit: RecoveryCredit,
        hooks: TurnHooks,
        reading: StreamReading = PLAIN_READING,
    ) -> None:
        self._ctx = ctx
        self._messages = messages
        self._stream = stream
        self._credit = credit
        self._hooks = hooks
        self._reading = reading

    async def drive(self, state: TurnState) -> tuple[str, str | None]:
        signal = state.controller.signal
        pending = state.builder.pending_tool_calls() if state.plan.continue_message_id else []
        watchdog = StallWatchdog(self._ctx.host.clock, self._hooks._stream_stall_timeout_ms())
        for step in range(self._hooks.max_steps):
            if pending:
                ran = await self._run_tools(state, pending, watchdog)
                if ran is ABORTED:
                    return "aborted", None
                if ran is STALLED:
                    return "stalled", None
                pending = []
            if signal.aborted:
                return "aborted", None
            calls, finish = [], None
            stream = self._ctx.host.outbound.open_stream(
                self._hooks.model_service, self._model_request(state, step)
            )
            while True:
                try:
                    chunk = await self._next_model_chunk(stream, state, watchdog)
                except Exception as exc:  # noqa: BLE001 - a provider failure ends the turn
                    if self._routes_read_error(exc, signal):
                        return "interrupted", error_message(exc)
                    return "error", self.fail(state, error_message(exc))
                if chunk is ABORTED:
                    return "aborted", None
                if chunk is STALLED:
                    return "stalled", None
                if chunk is END:
                    break
                if not isinstance(chunk, Mapping):
                    continue
                kind = chunk.get("type")
                if kind == "start":
                    if state.started:
                        continue
                    state.started = True
                    chunk = {**chunk, "messageId": state.builder.message["id"]}
                elif kind == "finish":
                    finish = dict(chunk)
                    continue
                elif kind == "error":
                    text = chunk.get("errorText")
                    return "error", self.fail(state, str(text or "model stream failed"))
                elif kind == "tool-input-available":
                    calls.append(dict(chunk))
                self.emit_chunk(state, chunk)
            if not calls:
                if state.started:
                    self.emit_chunk(state, finish or {"type": "finish"})
                    # End the step here, so the finish chunk commits on its own: whatever the
                    # turn's last step does next (persist the answer, end the stream, drop the
                    # fiber row, a delivery mark queued behind the turn), a crash in it leaves
                    # the proof that the answer was complete, and chat recovery completes the
                    # answer instead of asking the model for it again.
                    await self._ctx.host.clock.sleep(0)
                return "completed", None
            pending = calls
        return "error", self.fail(
            state,
            f"the model was still calling tools after max_steps={self._hooks.max_steps} calls",
        )

    def _model_request(self, state: TurnState, step: int) -> dict[str, Any]:
        messages = self._messages.all()
        current = state.builder.message
        if current["parts"]:
            messages = [m for m in messages if m.get("id") != current["id"]] + [current]
        request: dict[str, Any] = {
            "messages": messages,
            "tools": list(self._hooks.get_tools()),
            "system": self._hooks.get_system_prompt(),
            "requestId": state.plan.request_id,
            "trigger": state.plan.trigger,
            "step": step,
        }
        if state.plan.continue_message_id and step == 0:
            request["continuation"] = True
        if state.plan.body is not None:
            request["body"] = state.plan.body
        return request

    def _routes_read_error(self, error: Exception, signal: AbortSignal) -> bool:
        """A read error of the model stream that chat recovery takes (0.32.0: a platform
        transient, on a turn not aborted; the SDK's stream `catch` in `_reply`)."""
        if not self._reading.routes_transient_read_errors or signal.aborted:
            return False
        return is_recoverable_stream_read_error(error)

    async def _next_model_chunk(
        self, stream: Any, state: TurnState, watchdog: StallWatchdog
    ) -> Any:
        if state.controller.signal.aborted:
            return ABORTED

        async def pull() -> Any:
            try:
                return await stream.__anext__()
            except StopAsyncIteration:
                return END

        if not watchdog.armed:
            return await self._ctx.host.tasks.race(pull(), state.aborted)
        race = self._ctx.host.tasks.race(pull(), state.aborted, watchdog.expired())
        chunk = watchdog.settle(await race)
        if chunk is not STALLED:
            watchdog.touch()
        return chunk

    async def _run_tools(
        self, state: TurnState, calls: list[dict[str, Any]], watchdog: StallWatchdog
    ) -> Any:
        """Run the calls in parallel, each output streamed as it lands; `ABORTED`, or
        `STALLED` when the watchdog's window passes with no output (the SDK's watchdog wraps
        the whole UI stream, tool runs included, §8.2): a call that ends after that sends
        nothing, and the continuation runs it again."""
        tools = self._hooks.get_tools()
        signal = state.controller.signal

        async def run_one(chunk: dict[str, Any]) -> None:
            ok, value = await self._execute_tool(tools, chunk, signal)
            if signal.aborted or watchdog.fired:
                return
            call_id = chunk.get("toolCallId")
            if ok:
                out = {"type": "tool-output-available", "toolCallId": call_id, "output": value}
            else:
                out = {"type": "tool-output-error", "toolCallId": call_id, "errorText": value}
            self.emit_chunk(state, out)
            watchdog.touch()

        everything = self._ctx.host.tasks.gather(*(run_one(c) for c in calls))
        if not watchdog.armed:
            return await self._ctx.host.tasks.race(everything, state.aborted)
        race = self._ctx.host.tasks.race(everything, state.aborted, watchdog.expired())
        return watchdog.settle(await race)

    async def _execute_tool(
        self, tools: Mapping[str, Any], chunk: Mapping[str, Any], signal: AbortSignal
    ) -> tuple[bool, Any]:
        name = chunk.get("toolName")
        tool = tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return False, f"Tool {name!r} is not available; tools: {sorted(tools)}"
        try:
            result = tool.execute(
                chunk.get("input"), tool_call_id=chunk.get("toolCallId"), signal=signal
            )
            if inspect.isawaitable(result):
                result = await result
            to_json_text(result, f"the output of tool {name!r}")
            return True, result
        except Exception as exc:  # noqa: BLE001 - a failing tool is reported to the model
            return False, error_message(exc)

    # -- frames -------------------------------------------------------------------------------
    def emit_chunk(self, state: TurnState, chunk: Mapping[str, Any]) -> int | None:
        """Store a UI chunk in the turn's stream, apply it to the answer, broadcast it; its
        index in the stream (None: too large to store, on a release that keeps such out)."""
        body = to_json_text(dict(chunk), "a UI chunk")
        index = self._stream.append(state.stream_id, body)
        self.publish_chunk(state, chunk, body, index)
        return index

    def publish_chunk(
        self, state: TurnState, chunk: Mapping[str, Any], body: str, index: int | None
    ) -> None:
        """A chunk stored at `index` of the turn's stream (None: not stored): credit it if
        stored, apply it, broadcast it."""
        if index is not None:
            self._credit.stored_chunk(chunk.get("type"))
        state.builder.apply(chunk)
        frame = self.response_frame(state, body, done=False)
        self._hooks._broadcast_chat_frame(frame, chunk_index=index)

    def fail(self, state: TurnState, message: str) -> str:
        self._hooks._broadcast_chat_frame({**self.response_frame(state, message), "error": True})
        return message

    def response_frame(self, state: TurnState, body: str, *, done: bool = False) -> dict[str, Any]:
        """A `cf_agent_use_chat_response` frame of the turn; on 0.32.0 a continuation turn's
        says `continuation: true` (chunk, error and `done` frames alike, as ai-chat 0.12.2's
        `_reply` sends them)."""
        frame: dict[str, Any] = {
            "type": CHAT_RESPONSE_TYPE,
            "id": state.plan.request_id,
            "body": body,
            "done": done,
        }
        if self._reading.marks_continuation_frames and state.plan.continue_message_id:
            frame["continuation"] = True
        return frame


def error_message(error: BaseException) -> str:
    return str(error) or type(error).__name__
