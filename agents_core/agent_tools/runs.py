"""`run_agent_tool`: dispatch a run to a child sub-agent, awaited or detached, idempotent by run
id (spec agent-tools §2.2–2.6, §1.5–1.6).

New run: cap check (synchronous, before any await) and insert `starting` (both `admission.py`),
`on_agent_tool_start`, `started`@0, resolve the child facet named by the run id,
`start_agent_tool_run`, `running`.
Awaited: tail and forward the child's chunks, inspect, finish (guarded terminal update, terminal
frame, `on_agent_tool_finish`). Detached: hand over to `detached.py`. An existing run id never
starts a second child turn: it returns the stored result, or re-attaches.

Seed decision S6: a child reset (evicted, redeployed) while the parent lives makes the run
`interrupted` and retryable, not the SDK's non-retryable `error`. Seed decision S8: finishing goes
through the delivery ledger (`ledger.py`), so `on_agent_tool_finish` fires once per run and slot
even when two observers finish one run or the hook throws (the SDK re-finishes as `error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast, overload

from agents_core.agent_tools.frames import frame, started_event, terminal_event
from agents_core.agent_tools.registry import (
    HARD_TERMINAL,
    AgentToolRunInfo,
    DetachedRunAgentToolResult,
    RunAgentToolResult,
    default_input_preview,
)
from agents_core.agent_tools.self_type import AgentToolsSelf
from agents_core.errors import AgentReset, InvalidArgument
from agents_core.jsontext import parse_json_text, to_json_text
from agents_core.probes import probe

__all__ = ["ADAPTER_METHODS", "RunsMixin", "result_from_inspection"]

ADAPTER_METHODS = (
    "start_agent_tool_run",
    "cancel_agent_tool_run",
    "inspect_agent_tool_run",
    "get_agent_tool_chunks",
)
TAIL_METHOD = "open_agent_tool_tail"
ADAPTER_MISSING = (
    "Agent tool child must implement the framework agent-tool adapter. Use a ThinkAgent "
    "subclass or a ChatAgent subclass."
)


def result_from_inspection(
    run_id: str, agent_type: str, inspection: dict[str, Any] | None
) -> RunAgentToolResult:
    """The SDK's inspection→result rule: completed keeps output and summary, aborted keeps its
    error, anything else (error, still running, null) is an error."""
    found = inspection or {}
    status = found.get("status")
    if status == "completed":
        return RunAgentToolResult(
            run_id,
            agent_type,
            "completed",
            output=found.get("output"),
            summary=found.get("summary"),
            has_output="output" in found,
        )
    if status == "aborted":
        return RunAgentToolResult(run_id, agent_type, "aborted", error=found.get("error"))
    error = found.get("error") or "Agent tool run failed"
    return RunAgentToolResult(run_id, agent_type, "error", error=error)


CLEAR_REASON = "clearing agent tool run"
"""The cancel reason `clear_agent_tool_runs` gives a child that still runs."""


def _abort_message(reason: Any) -> str:
    if isinstance(reason, BaseException):
        return str(reason)
    return str(reason if reason is not None else "cancelled")


class RunsMixin:
    # -- hooks ------------------------------------------------------------------------------------
    async def on_agent_tool_start(self: AgentToolsSelf, run: AgentToolRunInfo) -> None:
        """Once per admitted new run, before its `started` frame."""

    async def on_agent_tool_finish(
        self: AgentToolsSelf, run: AgentToolRunInfo, result: Any
    ) -> None:
        """When a run finishes (awaited: each time a live call, re-issue or recovery finishes it;
        detached: once per ledger delivery, at least once across a crash)."""

    # -- rows -------------------------------------------------------------------------------------
    def _read_agent_tool_run(self: AgentToolsSelf, run_id: str) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
        return rows[0] if rows else None

    def _update_agent_tool_terminal(
        self: AgentToolsSelf,
        run_id: str,
        result: RunAgentToolResult,
        completed_at: int | None = None,
    ) -> bool:
        """The one guarded terminal write: never over a hard terminal."""
        completed_at = self.host.clock.now_ms() if completed_at is None else completed_at
        output_json = to_json_text(result.output, "output") if result.has_output else None
        interrupted = result.status == "interrupted"
        still = result.child_still_running
        changed = self.host.sql.execute(
            "UPDATE cf_agent_tool_runs SET status = ?, summary = ?, output_json = ?, "
            "error_message = ?, interrupted_reason = ?, child_still_running = ?, completed_at = ? "
            "WHERE run_id = ? AND status NOT IN ('completed', 'error', 'aborted')",
            (
                result.status,
                result.summary,
                output_json,
                result.error,
                result.reason if interrupted else None,
                (None if still is None else int(still)) if interrupted else None,
                completed_at,
                run_id,
            ),
        )
        if not changed and result.status == "completed" and result.has_output:
            self.sql(
                "UPDATE cf_agent_tool_runs SET output_json = COALESCE(output_json, ?), "
                "summary = COALESCE(summary, ?) WHERE run_id = ? AND status = 'completed'",
                output_json,
                result.summary,
                run_id,
            )
        return bool(changed)

    def _result_from_agent_tool_row(
        self: AgentToolsSelf, row: dict[str, Any]
    ) -> RunAgentToolResult:
        ok, output = parse_json_text(row["output_json"])
        has_output = row["output_json"] is not None and ok
        still = row["child_still_running"]
        return RunAgentToolResult(
            row["run_id"],
            row["agent_type"],
            row["status"],
            output=output if has_output else None,
            summary=row["summary"],
            error=row["error_message"],
            reason=row["interrupted_reason"],
            child_still_running=None if still is None else bool(still),
            has_output=has_output,
        )

    async def _finish_agent_tool_run(
        self: AgentToolsSelf,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None = None,
        *,
        serialize: bool = False,
        defer_handlers_to: list[Any] | None = None,
    ) -> bool:
        """Finish a run through the ledger (S8): a soft `interrupted` through the `give_up` slot,
        a real result through `finish`. The slot's first delivery writes the row, broadcasts the
        terminal frame and calls the hooks; a later one writes the (guarded) row and, when that
        changed it (a second give-up with another reason), broadcasts the new terminal frame so
        clients follow the row, without calling the hooks again."""
        slot = "give_up" if result.status == "interrupted" else "finish"
        delivered = await self._deliver_agent_tool_terminal(
            row["run_id"],
            slot,
            result,
            sequence=sequence,
            completed_at=completed_at,
            serialize=serialize,
            defer_handlers_to=defer_handlers_to,
        )
        if not delivered and row["run_id"] in self._agent_tool_runs_cleared_in_flight:
            return await self._finish_cleared_awaited_run(row, result, sequence, completed_at)
        if not delivered and self._update_agent_tool_terminal(row["run_id"], result, completed_at):
            now = self.host.clock.now_ms()
            self.broadcast(
                frame(
                    row["parent_tool_call_id"],
                    now if sequence is None else sequence,
                    terminal_event(result),
                )
            )
        return delivered

    async def _finish_cleared_awaited_run(
        self: AgentToolsSelf,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None,
    ) -> bool:
        """An awaited run cleared while its call was in flight (E22): its row is gone, so the
        ledger has nothing to claim, yet the call still ends (`aborted` by the clear's cancel,
        see `_finish_awaited`), broadcasts its terminal frame and calls `on_agent_tool_finish`,
        as the SDK does (docs/divergences.md A16). Once: the run id leaves the cleared set here,
        and nothing else finishes a run without a row."""
        self._agent_tool_runs_cleared_in_flight.discard(row["run_id"])
        probe(self.host, "agent_tool.cleared_awaited_run_finished")
        now = self.host.clock.now_ms()
        self.broadcast(
            frame(
                row["parent_tool_call_id"],
                now if sequence is None else sequence,
                terminal_event(result),
            )
        )
        slot = "give_up" if result.status == "interrupted" else "finish"
        completed_at = now if completed_at is None else completed_at
        info = AgentToolRunInfo.from_row(row, status=result.status, completed_at=completed_at)
        await self._invoke_finish_handlers(row, slot, info, result)
        return True

    # -- children ---------------------------------------------------------------------------------
    async def _agent_tool_child(self: AgentToolsSelf, cls_or_name: type | str, run_id: str) -> Any:
        """The child facet for a run, checked against the adapter contract."""
        if isinstance(cls_or_name, str):
            child = await self.host.facets.resolve_named(cls_or_name, run_id)
            cls = getattr(child, "record", None)
            cls = cls.cls if cls is not None else None
        else:
            child = await self.sub_agent(cls_or_name, run_id)
            cls = cls_or_name
        if cls is not None and not all(callable(getattr(cls, m, None)) for m in ADAPTER_METHODS):
            raise InvalidArgument(ADAPTER_MISSING)
        return child

    @staticmethod
    def _child_can_tail(child: Any) -> bool:
        record = getattr(child, "record", None)
        return record is None or callable(getattr(record.cls, TAIL_METHOD, None))

    # -- the public call --------------------------------------------------------------------------
    # An awaited run (detached None or False) answers with its result, a detached one with its
    # handle.
    @overload
    async def run_agent_tool(
        self: AgentToolsSelf,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Literal[False] | None = None,
        input_preview: Any = None,
        display: Any = None,
    ) -> RunAgentToolResult: ...

    @overload
    async def run_agent_tool(
        self: AgentToolsSelf,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Literal[True] | Mapping[str, Any],
        input_preview: Any = None,
        display: Any = None,
    ) -> DetachedRunAgentToolResult: ...

    async def run_agent_tool(
        self: AgentToolsSelf,
        cls: type,
        *,
        input: Any,
        run_id: str | None = None,
        parent_tool_call_id: str | None = None,
        display_order: int = 0,
        signal: Any = None,
        detached: Any = None,
        input_preview: Any = None,
        display: Any = None,
    ) -> RunAgentToolResult | DetachedRunAgentToolResult:
        """Run `cls` as a tool on `input` in a child sub-agent named by the run id."""
        run_id = run_id if run_id is not None else self.host.entropy.nanoid(12)
        agent_type = cls.__name__
        config = self._parse_detached_option(detached)
        existing = self._read_agent_tool_run(run_id)
        if existing is not None:
            return await self._reissue_agent_tool_run(cls, existing, config)
        preview = input_preview if input_preview is not None else default_input_preview(input)
        rejected: RunAgentToolResult | None = self._agent_tool_cap_rejection(
            run_id, agent_type, parent_tool_call_id, display_order, preview, display, config
        )
        if rejected is not None:
            return rejected
        dispatching = self._agent_tool_runs_dispatching
        dispatching.add(run_id)
        try:
            now = self.host.clock.now_ms()
            self._insert_agent_tool_run(
                run_id,
                agent_type,
                parent_tool_call_id,
                display_order,
                preview,
                display,
                now,
                config,
            )
            if config is not None:
                # In the row's own turn: a crash before the child has started must still leave a
                # tick that gives the run up (the SDK arms only after the child start: divergence
                # A7; the seed promises a run past its budget is never silently lost).
                try:
                    await self._arm_detached_backbone(reset_cadence=True)
                except Exception:
                    self._drop_unarmed_agent_tool_run(run_id)
                    raise
            # The row this turn just wrote (a read that fails raises, a storage fault).
            row = cast("dict[str, Any]", self._read_agent_tool_run(run_id))
            await self.on_agent_tool_start(AgentToolRunInfo.from_row(row))
            self.broadcast(
                frame(
                    parent_tool_call_id,
                    0,
                    started_event(run_id, agent_type, preview, display_order, display),
                )
            )
            child = await self._agent_tool_child(cls, run_id)
            start = await child.call("start_agent_tool_run", input, run_id)
        finally:
            dispatching.discard(run_id)
        self.sql(
            "UPDATE cf_agent_tool_runs SET status = 'running' WHERE run_id = ? "
            "AND status = 'starting'",
            run_id,
        )
        if config is not None:
            return await self._dispatch_detached_run(cls, run_id, agent_type, config, signal)
        return await self._await_agent_tool_run(child, row, start, signal)

    def _drop_unarmed_agent_tool_run(self: AgentToolsSelf, run_id: str) -> None:
        """Arming the backbone for a new detached run failed (a storage error): nothing would
        ever give the run up, and nothing was announced yet (no hook, no frame, no child), so
        the row goes and the dispatch fails as a whole."""
        try:
            self.sql("DELETE FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
            probe(self.host, "agent_tool.unarmed_dispatch_dropped")
        except Exception as exc:  # noqa: BLE001 - the next startup re-arms for the row (A5)
            self._log("error", f"dropping detached run {run_id} after a failed arm: {exc}")

    # -- awaited ----------------------------------------------------------------------------------
    async def _await_agent_tool_run(
        self: AgentToolsSelf, child: Any, row: dict[str, Any], start: Any, signal: Any
    ) -> RunAgentToolResult:
        run_id, agent_type = row["run_id"], row["agent_type"]
        sequence = 1
        if signal is not None and signal.aborted:
            await self._cancel_child_quietly(child, run_id, signal.reason)
            result = RunAgentToolResult(
                run_id, agent_type, "aborted", error=_abort_message(signal.reason)
            )
            return await self._finish_awaited(row, result, sequence)
        if signal is not None:
            signal.add_listener(
                lambda reason: self.host.tasks.wait_until(
                    self._cancel_child_quietly(child, run_id, reason)
                )
            )
        try:
            outcome = await self._forward_agent_tool_stream(
                child, run_id, row["parent_tool_call_id"], sequence, signal=signal
            )
            sequence = outcome.sequence
            if signal is not None and signal.aborted:
                await self._cancel_child_quietly(child, run_id, signal.reason)
                result = RunAgentToolResult(
                    run_id, agent_type, "aborted", error=_abort_message(signal.reason)
                )
                return await self._finish_awaited(row, result, sequence)
            inspection = await child.call("inspect_agent_tool_run", run_id)
            result = result_from_inspection(run_id, agent_type, inspection or start)
            completed_at = (inspection or {}).get("completedAt")
            return await self._finish_awaited(row, result, sequence, completed_at)
        except AgentReset as reset:
            # S6: the child was reset while this parent lives: soft, retryable.
            probe(self.host, "agent_tool.child_reset_interrupted")
            result = RunAgentToolResult(
                run_id,
                agent_type,
                "interrupted",
                child_still_running=True,
                error=f"Agent tool child was reset ({reset.reason}) before it finished; "
                "it can be retried",
            )
            return await self._finish_awaited(row, result, sequence)
        except Exception as exc:  # noqa: BLE001 - any failure finishes the run as error
            if signal is not None and signal.aborted:
                await self._cancel_child_quietly(child, run_id, signal.reason)
                result = RunAgentToolResult(
                    run_id, agent_type, "aborted", error=_abort_message(signal.reason)
                )
            else:
                result = RunAgentToolResult(run_id, agent_type, "error", error=str(exc))
            return await self._finish_awaited(row, result, sequence)

    async def _finish_awaited(
        self: AgentToolsSelf,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int,
        completed_at: int | None = None,
    ) -> RunAgentToolResult:
        if (
            result.status != "completed"
            and row["run_id"] in self._agent_tool_runs_cleared_in_flight
        ):
            # A clear deleted the row, cancelled the child and deleted its facet: whatever the
            # call saw after that (the reset of the deleted facet, a failed inspection) is that
            # teardown, so the run ends as the cancel ended it.
            result = RunAgentToolResult(
                row["run_id"], row["agent_type"], "aborted", error=CLEAR_REASON
            )
        await self._finish_agent_tool_run(row, result, sequence, completed_at)
        return result

    async def _cancel_child_quietly(
        self: AgentToolsSelf, child: Any, run_id: str, reason: Any
    ) -> None:
        try:
            await child.call("cancel_agent_tool_run", run_id, reason)
        except Exception as exc:  # noqa: BLE001 - best effort
            self._log("warn", f"cancelling agent tool run {run_id} failed: {exc}")

    # -- an existing run id (§2.4) ------------------------------------------------------------
    async def _reissue_agent_tool_run(
        self: AgentToolsSelf, cls: type, row: dict[str, Any], config: Any
    ) -> RunAgentToolResult | DetachedRunAgentToolResult:
        """Never a second child turn: a detached re-issue re-arms the backbone and says
        `running`; an awaited one returns the stored result or re-attaches to the child."""
        run_id, status = row["run_id"], row["status"]
        if config is not None:
            if status not in HARD_TERMINAL:
                await self._arm_detached_backbone(reset_cadence=False)
            return DetachedRunAgentToolResult(run_id, row["agent_type"], "running")
        if status == "completed" and row["output_json"] is None:
            return await self._reinspect_completed_run(cls, row)
        if status in HARD_TERMINAL:
            return self._result_from_agent_tool_row(row)
        return await self._reattach_on_reissue(cls, row)

    async def _reinspect_completed_run(
        self: AgentToolsSelf, cls: type, row: dict[str, Any]
    ) -> RunAgentToolResult:
        stored = self._result_from_agent_tool_row(row)
        try:
            child = await self._agent_tool_child(cls, row["run_id"])
            inspection = await child.call("inspect_agent_tool_run", row["run_id"])
        except Exception:  # noqa: BLE001 - any failure falls back to the stored row
            return stored
        if not inspection or inspection.get("status") != "completed":
            return stored
        result = result_from_inspection(row["run_id"], row["agent_type"], inspection)
        if result.has_output:
            self.sql(
                "UPDATE cf_agent_tool_runs SET output_json = COALESCE(output_json, ?), "
                "summary = COALESCE(summary, ?) WHERE run_id = ?",
                to_json_text(result.output, "output"),
                result.summary,
                row["run_id"],
            )
        return result
