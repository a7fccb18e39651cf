"""The run rows of agent tools and the children they name (spec agent-tools §2.1, §2.4).

`RunStore` reads a run's row of `cf_agent_tool_runs`, makes the one guarded terminal write (never
over a hard terminal), turns a row into a result, and resolves the child facet a run id names,
checked against the framework adapter contract. `result_from_inspection` is the SDK's rule from a
child's inspection to a run's result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.registry import RunAgentToolResult
from agents_core.errors import InvalidArgument
from agents_core.jsontext import parse_json_text, to_json_text

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.context import AgentContext

__all__ = ["ADAPTER_METHODS", "CLEAR_REASON", "RunStore", "result_from_inspection"]

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


class RunStore:
    """The rows of `cf_agent_tool_runs` and the children they name: the one guarded terminal
    write, a row as a result, and the child facet of a run checked against the adapter
    contract. Also the in-memory sets of this incarnation that several parts consult: the runs
    whose child start is in flight, and the awaited runs a clear deleted while their call may
    still be in flight (E22)."""

    __slots__ = ("_ctx", "_agent", "dispatching", "cleared_in_flight")

    def __init__(self, ctx: AgentContext, agent: AgentToolHooks) -> None:
        self._ctx = ctx
        self._agent = agent
        self.dispatching: set[str] = set()
        """The run ids whose child start this incarnation has in flight (row inserted, the
        child's start call not returned): the only path that can still give a child its run."""
        self.cleared_in_flight: set[str] = set()
        """The awaited runs a clear deleted while their call may still be in flight (E22): that
        call still ends with its frame and hook, once, with no row to deliver through."""

    def read(self, run_id: str) -> dict[str, Any] | None:
        rows = self._ctx.sql("SELECT * FROM cf_agent_tool_runs WHERE run_id = ?", run_id)
        return rows[0] if rows else None

    def update_terminal(
        self,
        run_id: str,
        result: RunAgentToolResult,
        completed_at: int | None = None,
    ) -> bool:
        """The one guarded terminal write: never over a hard terminal."""
        completed_at = self._ctx.host.clock.now_ms() if completed_at is None else completed_at
        output_json = to_json_text(result.output, "output") if result.has_output else None
        interrupted = result.status == "interrupted"
        still = result.child_still_running
        changed = self._ctx.host.sql.execute(
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
            self._ctx.sql(
                "UPDATE cf_agent_tool_runs SET output_json = COALESCE(output_json, ?), "
                "summary = COALESCE(summary, ?) WHERE run_id = ? AND status = 'completed'",
                output_json,
                result.summary,
                run_id,
            )
        return bool(changed)

    def result_from_row(self, row: dict[str, Any]) -> RunAgentToolResult:
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

    async def child(self, cls_or_name: type | str, run_id: str) -> Any:
        """The child facet for a run, checked against the adapter contract."""
        if isinstance(cls_or_name, str):
            child = await self._ctx.host.facets.resolve_named(cls_or_name, run_id)
            cls = getattr(child, "record", None)
            cls = cls.cls if cls is not None else None
        else:
            child = await self._agent.sub_agent(cls_or_name, run_id)
            cls = cls_or_name
        if cls is not None and not all(callable(getattr(cls, m, None)) for m in ADAPTER_METHODS):
            raise InvalidArgument(ADAPTER_MISSING)
        return child

    @staticmethod
    def can_tail(child: Any) -> bool:
        record = getattr(child, "record", None)
        return record is None or callable(getattr(record.cls, TAIL_METHOD, None))
