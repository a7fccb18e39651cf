"""`ChatHost`: what Think-like and AIChatAgent-like agents share, assembled from the mixins.

A chat host is an `Agent` with a transcript (`messages`, the `ChatMessages` component), a
resumable stream (the `ResumableStream` component), a FIFO turn queue
whose turns are fibers streaming from the model service, chat recovery, `report_progress`, and
the agent-tool child adapter with its tail and broadcast snoop, and the parent side's serialized
deliveries and recovery credit (`parent.py`). `ThinkAgent` and `ChatAgent`
subclass it and differ only where the SDK's two hosts differ (spec agent-tools §11 E25).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from agents_core.agent import Agent
from agents_core.chat.chat_recovery import (
    DEFAULT_NO_PROGRESS_TIMEOUT_MS,
    ChatRecovery,
    ChatRecoveryContext,
    is_chat_turn_fiber,
)
from agents_core.chat.child_runs import AgentToolChildMixin
from agents_core.chat.messages import ChatMessages
from agents_core.chat.parent import RecoveryCredit, run_serialized_delivery
from agents_core.chat.progress import AgentToolProgress
from agents_core.chat.stream_store import ResumableStream
from agents_core.chat.tails import AgentToolTailsMixin
from agents_core.chat.turns import ChatTurns, _TurnState
from agents_core.host import Host
from agents_core.recovery import FiberRecoveryContext
from agents_core.signals import AbortSignal

__all__ = ["ChatHost"]


class ChatHost(
    AgentToolTailsMixin,
    AgentToolChildMixin,
    Agent,
):
    """The shared base of the chat hosts; subclass `ThinkAgent` or `ChatAgent`, not this."""

    model_service: ClassVar[str] = "model"
    """The upstream service turns stream from."""
    system_prompt: ClassVar[str | None] = None
    max_steps: ClassVar[int] = 10
    """Model calls per turn (each tool round is one more)."""
    max_chat_recovery_attempts: ClassVar[int] = 10
    chat_recovery_no_progress_timeout_ms: ClassVar[int] = DEFAULT_NO_PROGRESS_TIMEOUT_MS
    """The SDK's `chatRecovery.noProgressTimeoutMs`: give up on a turn that made no progress for
    this long (measured from the last recovery that found progress, or the first detection)."""

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        self._messages = ChatMessages(self._context)
        self._stream = ResumableStream(self._context)
        self._recovery_credit = credit = RecoveryCredit(self._context)
        self._turns = ChatTurns(self._context, self._messages, self._stream, credit, self)
        self._chat_recovery = ChatRecovery(
            self._context, self._messages, self._stream, self._turns, self._fibers, credit, self
        )
        self._progress = AgentToolProgress(self._context, self._stream, self._turns, self)
        self._init_agent_tool_child()

    # -- the SDK's surface ----------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The persisted transcript, oldest first."""
        return self._messages.all()

    def stream_chunks(self, stream_id: str | None, after: int = -1) -> list[dict[str, Any]]:
        """Stored chunks of a stream with index > `after`, as {"sequence", "body"}."""
        return self._stream.chunks(stream_id, after)

    async def save_messages(
        self, messages: Sequence[Mapping[str, Any]], *, signal: AbortSignal | None = None
    ) -> dict[str, Any]:
        """Run one turn that persists `messages` when it starts, after the turns queued before
        it; `{"requestId", "status", "error"?}` (`ChatTurns.save_messages`)."""
        return await self._turns.save_messages(messages, signal=signal)

    async def clear_messages(self) -> None:
        """Forget the transcript: queued turns are skipped, the running one is aborted."""
        await self._turns.clear()

    async def on_message(self, connection: Any, message: Any) -> None:
        """A chat client's request (`cf_agent_use_chat_request`) runs a turn."""
        await self._turns.on_message(connection, message)

    def classify_chat_recovery(self, run_id: str | None = None) -> str:
        """`in-progress`, `failed` or `none` (`ChatRecovery.classify`)."""
        return self._chat_recovery.classify(run_id)

    # A chat host's report_progress is async and answers with the outcome; a plain Agent's is
    # a synchronous no-op that warns (as in the SDK), so this override cannot match it.
    async def report_progress(  # type: ignore[override]
        self,
        fraction: float | None = None,
        message: str | None = None,
        phase: str | None = None,
        milestone: str | None = None,
        data: Any = None,
        persist: bool = False,
    ) -> str:
        """Report progress of the agent-tool run this turn serves: `emitted`, `coalesced`, or
        `inactive` (`AgentToolProgress.report_progress`)."""
        return self._progress.report_progress(fraction, message, phase, milestone, data, persist)

    # -- the hooks users override -------------------------------------------------------------
    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> str | None:
        """Return `continue`, `retry`, `skip` or `complete` to override the framework's choice
        (None). `complete` is only taken for an answer streamed in full; otherwise the
        framework's choice stands."""
        return None

    def get_tools(self) -> Mapping[str, Any]:
        """Server tools by name; each has `description`, `input_schema` and
        `async execute(input, tool_call_id=..., signal=...)`."""
        return {}

    def get_system_prompt(self) -> str | None:
        return self.system_prompt

    # -- the runtime's entries -----------------------------------------------------------------
    async def _handle_internal_fiber_recovery(self, ctx: FiberRecoveryContext) -> bool:
        if not is_chat_turn_fiber(ctx.name):
            return bool(await super()._handle_internal_fiber_recovery(ctx))
        return await self._chat_recovery.claim(ctx)

    async def _chat_recovery_continue(self, payload: Any, _row: Any = None) -> None:
        """The schedule callback that runs a recovered turn (the SDK's `_chatRecoveryContinue`)."""
        await self._chat_recovery.continue_turn(payload)

    # -- the agent-tool parent's steps this host overrides (§4.11, §7.8) -----------------------
    async def _run_serialized_delivery(self, invoke: Callable[[], Awaitable[None]]) -> None:
        """Run a delivery on the chat turn queue, strictly between turns, under a keep-alive."""
        await run_serialized_delivery(self, self.keep_alive, self._turns, invoke)

    def _on_agent_tool_stream_progress(self) -> None:
        self._recovery_credit.child_streamed()

    # -- read by tests and fixtures -----------------------------------------------------------
    @property
    def _turn_states(self) -> dict[str, _TurnState]:
        """The running turns by request id."""
        return self._turns.states

    @property
    def _active_request_id(self) -> str | None:
        return self._turns.active_request_id
