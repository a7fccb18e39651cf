"""`ChatHost`: what Think-like and AIChatAgent-like agents share, built from components.

A chat host is an `Agent` with a transcript (`ChatMessages`), a resumable stream
(`ResumableStream`), a FIFO turn queue whose turns are fibers streaming from the model service
(`ChatTurns`), chat recovery (`ChatRecovery`, with its progress count `RecoveryCredit`),
`report_progress` (`AgentToolProgress`), the agent-tool child adapter with its tails and
broadcast snoop (`AgentToolChild`, `AgentToolTails`), and the parent side's serialized
deliveries (`parent.py`). This class builds them, in the order docs/architecture.md gives, and
holds the SDK's surface and hooks: each public method is a one-line delegation, each hook a
method a subclass may override (and call `super()` from). `ThinkAgent` and `ChatAgent` subclass
it and differ only where the SDK's two hosts differ (spec agent-tools §11 E25).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from agents_core.agent import Agent
from agents_core.chat.chat_recovery import (
    DEFAULT_NO_PROGRESS_TIMEOUT_MS,
    ChatRecoveryContext,
    is_chat_turn_fiber,
)
from agents_core.chat.chat_releases import chat_components
from agents_core.chat.child_runs import AgentToolChild
from agents_core.chat.continuation_runners import RecoveryHooks
from agents_core.chat.messages import ChatMessages
from agents_core.chat.parent import run_serialized_delivery
from agents_core.chat.progress import AgentToolProgress
from agents_core.chat.stream_store import ResumableStream
from agents_core.chat.tails import _Tail
from agents_core.chat.turns import CHAT_REQUEST_TYPE, ChatTurns, TurnResult, TurnState
from agents_core.host import Host
from agents_core.recovery import FiberRecoveryContext
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.releases.v0_32.breaker import MemoryLimitContext

__all__ = ["ChatHost"]


class ChatHost(Agent):
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
    chat_stream_stall_timeout_ms: ClassVar[int] = 0
    """The SDK's `chatStreamStallTimeoutMs`: on 0.32.0, a turn whose UI stream shows nothing for
    this long (a model read waiting, or a tool call running) is routed back into chat recovery
    (0: no watchdog; 0.21.0 has none)."""
    chat_recovery: ClassVar[Any] = None
    """The SDK's `chatRecovery` field: a mapping of options or True/False/None. Read by 0.32.0
    (`agents_core/chat/recovery_config.py`), where recovery is always on; 0.21.0's
    `chatRecovery = false` (recovery off) is not modelled: it takes the two knobs above."""
    _agent_tool_runs_table: ClassVar[str]
    _agent_tool_milestones_table: ClassVar[str]
    _agent_tool_active_statuses: ClassVar[tuple[str, ...]]

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        components = chat_components(self._release.name)
        self._messages = ChatMessages(self._context)
        self._stream = ResumableStream(self._context, components.chunk_limit)
        self._recovery_credit = credit = components.progress(self._context)
        self._turns = ChatTurns(
            self._context,
            self._messages,
            self._stream,
            credit,
            self,
            reading=components.stream_reading,
        )
        self._turn_runner = components.turn_runner(self._context, self, self._lifecycle)
        continuations = components.continuation_runner(self._context, self, self._lifecycle)
        self._chat_recovery = components.recovery(
            self._context,
            self._messages,
            self._stream,
            self._turns,
            self._fibers,
            credit,
            RecoveryHooks(self, continuations),
        )
        self._progress = AgentToolProgress(self._context, self._stream, self._turns, self)
        self._child_adapter = AgentToolChild(
            self._context,
            self._stream,
            self._turns,
            self._chat_recovery,
            self._progress,
            self,
            chunk_limit=components.chunk_limit,
            run_delivery=components.run_delivery,
        )

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
        self._chat_recovery.chat_cleared()

    async def on_connect(self, connection: Any) -> None:
        """A client connected: on 0.32.0 it learns a recovery in progress (`chat_terminal.py`)."""
        streaming = self._turns.active_request_id is not None
        self._chat_recovery.on_connect(connection, streaming)
        await super().on_connect(connection)

    async def on_message(self, connection: Any, message: Any) -> None:
        """A chat client's request (`cf_agent_use_chat_request`) runs a turn; on 0.32.0 the
        resume handshake replays the last terminal outcome (`chat_terminal.py`)."""
        streaming = self._turns.active_request_id is not None
        if self._chat_recovery.on_message(connection, message, streaming):
            return
        if isinstance(message, Mapping) and message.get("type") == CHAT_REQUEST_TYPE:
            self._chat_recovery.chat_request()
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

    # -- the agent-tool child adapter (RPC; spec agent-tools §1.2, §3.3, §6) -------------------
    async def start_agent_tool_run(
        self, input: Any, run_id: str, event_delivery: str | None = None
    ) -> dict[str, Any]:
        """Create the run and start its headless turn in the background; answers at once.
        `event_delivery` is `"terminal"` when a 0.32.0 parent asked for it: on 0.32.0 the run's
        chunks are then kept from this child's own clients (`terminal_runs.py`)."""
        return await self._child_adapter.start(input, run_id, event_delivery)

    async def cancel_agent_tool_run(self, run_id: str, reason: str | None = None) -> None:
        """Abort the run (and a recovery turn driving it), seal it `aborted`, close its tails."""
        await self._child_adapter.cancel(run_id, reason)

    async def inspect_agent_tool_run(
        self, run_id: str, reconcile: bool = True
    ) -> dict[str, Any] | None:
        """The run's snapshot (SDK keys), None iff this child has no row for it. A stale row is
        reconciled first unless `reconcile` is False (a 0.32.0 parent's replay asks so)."""
        return await self._child_adapter.inspect(run_id, reconcile)

    async def get_agent_tool_chunks(
        self, run_id: str, after_sequence: int = -1
    ) -> list[dict[str, Any]]:
        """Stored chunks of the run with index > `after_sequence`, as {"sequence", "body"}."""
        return await self._child_adapter.chunks(run_id, after_sequence)

    async def open_agent_tool_tail(self, run_id: str, after_sequence: int = -1) -> str:
        """Attach a reader to the run: stored chunks after `after_sequence`, then live ones."""
        return await self._child_adapter.tails.open(run_id, after_sequence)

    async def read_agent_tool_tail(self, tail_id: str) -> list[dict[str, Any]] | None:
        """The next records (waits for at least one), or None once the tail closed."""
        return await self._child_adapter.tails.read(tail_id)

    async def close_agent_tool_tail(self, tail_id: str) -> None:
        """Detach the reader (a pending read returns None); the run goes on."""
        await self._child_adapter.tails.close(tail_id)

    # -- the broadcast snoop (every frame passes the tails' snoop, then goes out unchanged,
    # unless it is a chunk of a run whose chunks the release keeps from this host's clients) --
    def broadcast(self, frame: Any, exclude: tuple[str, ...] = ()) -> None:
        if self._child_adapter.shown(self._child_adapter.tails.snoop(frame, None)):
            super().broadcast(frame, exclude)

    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None:
        """Broadcast a chat-response frame (`chunk_index`: its place in the stored stream)."""
        if self._child_adapter.shown(self._child_adapter.tails.snoop(frame, chunk_index)):
            super().broadcast(frame)

    # -- the hooks users override -------------------------------------------------------------
    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> str | None:
        """Return `continue`, `retry`, `skip` or `complete` to override the framework's choice
        (None). `complete` is only taken for an answer streamed in full; otherwise the
        framework's choice stands."""
        return None

    async def on_alarm_memory_limit(self, context: MemoryLimitContext) -> None:
        """0.32.0: on a sealing strike of the alarm memory-limit breaker, chat recovery gives
        every live incident up with `out_of_memory` (the SDK's `_cf_sealMemoryLimitedRecovery`);
        call `super()` from an override to keep that."""
        if context.sealed:
            await self._chat_recovery.seal_memory_limited()

    def get_tools(self) -> Mapping[str, Any]:
        """Server tools by name; each has `description`, `input_schema` and
        `async execute(input, tool_call_id=..., signal=...)`."""
        return {}

    def get_system_prompt(self) -> str | None:
        return self.system_prompt

    # -- the runtime's entries -----------------------------------------------------------------
    async def _run_chat_turn(
        self,
        request_id: str,
        continuation: bool,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        initial_snapshot: Any,
        wrap: Callable[[Any], Any],
    ) -> Any:
        """Run a turn's body in what the release gives it (`turn_runners.py`)."""
        return await self._turn_runner.run(request_id, continuation, fn, initial_snapshot, wrap)

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

    # -- the steps of the turns and of chat recovery that serve an agent-tool run -------------
    def _turn_snapshot_extra(self, request_id: str) -> dict[str, Any]:
        """More keys for a turn's fiber snapshot (the agent-tool run it serves; on 0.32.0 the
        latest user message, which names its recovery incident)."""
        extra = self._child_adapter.turn_snapshot_extra(request_id)
        return {**extra, **self._chat_recovery.turn_snapshot_extra()}

    def _stream_stall_timeout_ms(self) -> int:
        """How long a turn's model stream may stay silent (0: for ever; `ChatRecovery`)."""
        return self._chat_recovery.stream_stall_timeout_ms()

    async def _route_stalled_turn(
        self,
        request_id: str,
        snapshot: dict[str, Any],
        partial: dict[str, Any],
        *,
        backoff: bool = False,
    ) -> str | None:
        """A turn's model stream stalled (`backoff`: failed with a transient read error):
        `scheduled`, `exhausted`, or None to fail the turn."""
        return await self._chat_recovery.route_stall(request_id, snapshot, partial, backoff=backoff)

    def _on_turn_result(self, result: TurnResult) -> None:
        self._chat_recovery.turn_ended(result)

    def _on_turn_settled(self, request_id: str) -> None:
        self._child_adapter.on_turn_settled(request_id)

    def _rebind_agent_tool_run_for_recovery(self, request_id: str, incident_key: str) -> None:
        self._child_adapter.rebind_for_recovery(request_id, incident_key)

    def _stream_for_recovered_turn(self, request_id: str, payload: dict[str, Any]) -> Any:
        return self._child_adapter.stream_for_recovered_turn(request_id, payload)

    def _has_orphaned_task_turn(self) -> bool:
        """A live chat-turn Task run no turn of this incarnation runs (never on 0.21.0)."""
        return self._turn_runner.has_orphaned_turn()

    async def _after_chat_recovery(self, request_id: str | None) -> None:
        await self._child_adapter.after_recovery()

    async def _read_agent_tool_backlog(
        self, run_id: str, after_sequence: int
    ) -> list[dict[str, Any]]:
        """The stored backlog a new tail drains (a seam: tests land chunks inside the drain)."""
        return await self.get_agent_tool_chunks(run_id, after_sequence)

    # -- what each host provides (ThinkAgent, ChatAgent; spec agent-tools §11 E25) -------------
    def _ensure_agent_tool_tables(self) -> None:
        raise NotImplementedError

    def _agent_tool_tables_exist(self) -> bool:
        raise NotImplementedError

    def _insert_agent_tool_row(self, run_id: str, input: Any, now: int) -> None:
        raise NotImplementedError

    def _active_agent_tool_run(self) -> tuple[str | None, str | None]:
        raise NotImplementedError

    async def _drive_agent_tool_run(
        self, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _agent_tool_exception_terminal(
        self, error: Exception, controller: AbortController
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _write_agent_tool_terminal(self, run_id: str, terminal: dict[str, Any]) -> None:
        raise NotImplementedError

    def _seal_agent_tool_aborted(self, run_id: str, reason: str | None) -> None:
        raise NotImplementedError

    async def _inspection_from_row(self, row: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _agent_tool_stream_id(self, row: dict[str, Any]) -> str | None:
        raise NotImplementedError

    async def _messages_after_run_start(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _stale_completion(self, row: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    # -- read by tests and fixtures -----------------------------------------------------------
    @property
    def _turn_states(self) -> dict[str, TurnState]:
        """The running turns by request id."""
        return self._turns.states

    @property
    def _active_request_id(self) -> str | None:
        return self._turns.active_request_id

    @property
    def _agent_tool_request_runs(self) -> dict[str, str | None]:
        """requestId -> runId, as the child adapter knows them (progress reads it too)."""
        return self._child_adapter.request_runs

    @property
    def _agent_tool_controllers(self) -> dict[str, AbortController]:
        return self._child_adapter.controllers

    @property
    def _agent_tool_last_errors(self) -> dict[str, str]:
        return self._child_adapter.last_errors

    @property
    def _agent_tool_pre_turn_ids(self) -> dict[str, set[str]]:
        return self._child_adapter.pre_turn_ids

    @property
    def _agent_tool_live_seq(self) -> dict[str, int]:
        return self._child_adapter.tails.live_seq

    @property
    def _agent_tool_tails(self) -> dict[str, _Tail]:
        return self._child_adapter.tails.tails
