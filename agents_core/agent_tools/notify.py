"""Chat notifications of detached runs: the finish text (`notify`), the milestone text
(`on_milestones`) and the at-most-once delivery of milestone notifications (spec agent-tools
§4.9, §4.10).

The runtime does not inject chat messages itself: a chat host (Think-like, AIChatAgent-like)
implements `_cf_detached_notify_finish(run, lifecycle)` and
`_cf_detached_notify_milestone(run, milestone, mode)`, and uses the keys and metadata built here.
`notify` makes the first the run's stored `on_finish`; the second is called for every configured
milestone. A plain `Agent` has neither, so `notify` and `on_milestones` do nothing there.

Milestone dedupe (seed decision S3) is durable, in the parent's KV: one entry per (run, name)
under `cf_agents:agent_tool_milestone:<runId>:<name>`, holding `{state, at}`. `claimed` is written
before the host's hook is called, `delivered` or `failed` after; only a claim older than the
60 s lease (its isolate died mid-call) may be taken again, and the chat host's idempotency key
(`detached-ms:<runId>:<name>`) keeps that retry from showing twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.jsontext import parse_json_text
from agents_core.probes import probe
from agents_core.stored_names import DETACHED_NOTIFY_CALLBACK

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.context import AgentContext

__all__ = [
    "DEFAULT_NOTIFY_SOURCE",
    "DETACHED_MILESTONE_CALLBACK",
    "DETACHED_NOTIFY_CALLBACK",
    "MILESTONE_DEDUPE_PREFIX",
    "MilestoneNotifier",
    "detached_finish_key",
    "detached_milestone_key",
    "detached_notify_metadata",
    "milestone_config_of",
]

DETACHED_MILESTONE_CALLBACK = "_cf_detached_notify_milestone"
"""The chat host's milestone hook, `(run, milestone, mode)`."""
DEFAULT_NOTIFY_SOURCE = "detached-agent-tool"
MILESTONE_DEDUPE_PREFIX = "cf_agents:agent_tool_milestone:"
MILESTONE_CLAIM_LEASE_MS = 60_000
MILESTONE_MODES = ("narrate", "react")


def detached_finish_key(run_id: str, status: str) -> str:
    """The idempotency key (Think) / message id (AIChatAgent) of a finish notification."""
    return f"detached-finish:{run_id}:{status}"


def detached_milestone_key(run_id: str, name: str) -> str:
    """The idempotency key / message id of a milestone notification."""
    return f"detached-ms:{run_id}:{name}"


def detached_notify_metadata(run: AgentToolRunInfo, **extra: Any) -> dict[str, Any]:
    """`{source, runId, agentType, ...extra}` — `status` for a finish, `milestone` for one."""
    return {
        "source": run.notify_source or DEFAULT_NOTIFY_SOURCE,
        "runId": run.run_id,
        "agentType": run.agent_type,
        **extra,
    }


def milestone_config_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row's `{names, mode}` (a bare list of names means narrate), or None."""
    ok, config = parse_json_text(row.get("detached_on_milestones"))
    if not ok or not config:
        return None
    names = config if isinstance(config, list) else config.get("names")
    mode = "narrate" if isinstance(config, list) else (config.get("mode") or "narrate")
    if not isinstance(names, list) or not names:
        return None
    return {"names": names, "mode": mode}


def _label(run: AgentToolRunInfo) -> str:
    return f'Background task "{run.agent_type}" (run {run.run_id})'


def _lifecycle_of(result: Any) -> Mapping[str, Any]:
    lifecycle = getattr(result, "lifecycle", None)
    fields: Mapping[str, Any] = lifecycle() if callable(lifecycle) else result
    return fields


def completion_text(run: AgentToolRunInfo, result: Any) -> str:
    """The default text a chat host injects when a detached run finishes (the agent's
    `format_detached_completion`). `result` is the lifecycle `{status, summary?, error?,
    reason?, ...}`."""
    lifecycle = _lifecycle_of(result)
    status, label = lifecycle.get("status"), _label(run)
    error = lifecycle.get("error")
    if status == "completed":
        summary = lifecycle.get("summary")
        return f"{label} finished:\n\n{summary}" if summary else f"{label} finished successfully."
    if status == "error":
        return f"{label} failed: {error}" if error else f"{label} failed."
    if status == "aborted":
        return f"{label} was cancelled."
    if lifecycle.get("reason") == "budget-exceeded":
        return f"{label} ran out of time before completing and was stopped."
    if error:
        return f"{label} was interrupted before completing: {error}"
    return f"{label} was interrupted before completing."


def milestone_text(run: AgentToolRunInfo, milestone: Any) -> str:
    """The default text of a milestone notification (the agent's `format_detached_milestone`)."""
    text = f'{_label(run)} reached milestone "{milestone["name"]}".'
    if milestone.get("data") is not None:
        text += "\n\n" + json.dumps(milestone["data"], indent=2, ensure_ascii=False)
    return text


class MilestoneNotifier:
    """The at-most-once milestone notifications of detached runs, through the chat host's
    milestone hook (a plain agent has none, so nothing is notified there)."""

    __slots__ = ("_ctx", "_agent")

    def __init__(self, ctx: AgentContext, agent: AgentToolHooks) -> None:
        self._ctx = ctx
        self._agent = agent

    def notify_all(
        self,
        row: Mapping[str, Any],
        milestones: Sequence[Any] | None,
        *,
        reconciled: bool = False,
    ) -> None:
        for milestone in milestones or ():
            if isinstance(milestone, Mapping) and isinstance(milestone.get("name"), str):
                self.notify(row, milestone, reconciled=reconciled)

    def notify(self, row: Mapping[str, Any], milestone: Any, *, reconciled: bool = False) -> None:
        """Claim (run, name) and call the host's milestone hook in the background, unless the
        name is not configured, the host has no hook, or the pair was claimed already."""
        if not row["detached"]:
            return
        config = milestone_config_of(row)
        name = milestone["name"]
        if config is None or name not in config["names"]:
            return
        hook = getattr(self._agent, DETACHED_MILESTONE_CALLBACK, None)
        if not callable(hook):
            return
        # S3: at most once per (run, name) across the live path, reconciliation and evictions:
        # the claim is a durable KV entry, checked and written before any await.
        key = f"{MILESTONE_DEDUPE_PREFIX}{row['run_id']}:{name}"
        now = self._ctx.host.clock.now_ms()
        entry = self._ctx.host.kv.get(key)
        if entry is not None:
            stale_claim = (
                entry.get("state") == "claimed"
                and entry.get("at", now) < now - MILESTONE_CLAIM_LEASE_MS
            )
            if not stale_claim:
                probe(self._ctx.host, "agent_tool.milestone_deduped")
                return
            probe(self._ctx.host, "agent_tool.milestone_stale_claim_retaken")
        if reconciled:
            probe(self._ctx.host, "agent_tool.milestone_delivered_by_reconciliation")
        self._ctx.host.kv.put(key, {"state": "claimed", "at": now})
        mode = config["mode"] if config["mode"] in MILESTONE_MODES else "narrate"
        info = AgentToolRunInfo.from_row(row)
        self._ctx.host.tasks.wait_until(
            self._deliver_detached_milestone(hook, info, dict(milestone), mode, key)
        )

    async def _deliver_detached_milestone(
        self,
        hook: Any,
        run: AgentToolRunInfo,
        milestone: dict[str, Any],
        mode: str,
        key: str,
    ) -> None:
        try:
            await hook(run, milestone, mode)
        except Exception as exc:  # noqa: BLE001 - fire and forget: logged, never retried
            self._ctx.log(
                "warn",
                f"detached milestone delivery failed for run {run.run_id} "
                f"({milestone['name']}): {exc}",
            )
            self._ctx.host.kv.put(key, {"state": "failed", "at": self._ctx.host.clock.now_ms()})
            return
        self._ctx.host.kv.put(key, {"state": "delivered", "at": self._ctx.host.clock.now_ms()})
        # Trace-only (not an SDK event), as `hook:delivered` for finish slots: the hook returned
        # and its delivered mark was written (checker `delivered_marks_earned`).
        self._ctx.host.trace.emit(
            "hook:milestone_delivered", runId=run.run_id, name=milestone["name"]
        )

    def on_forwarded(self, row: dict[str, Any], data: dict[str, Any]) -> None:
        """A milestone forwarded live (awaited, fast path or re-attach)."""
        if not isinstance(data.get("name"), str):
            return
        milestone = {
            "name": data["name"],
            "sequence": data.get("sequence", 0),
            "at": data.get("at", self._ctx.host.clock.now_ms()),
        }
        if data.get("data") is not None:
            milestone["data"] = data["data"]
        # S3: the live path notifies as soon as the milestone is reached, before the run ends.
        self.notify(row, milestone)
