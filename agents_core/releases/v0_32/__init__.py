"""`agents@0.32.0` (2026-10-29): the release that rebuilt the alarm layer (spec `sdk-0.32.md`).

It is modelled in part, as a preview: `build` starts from the components 0.21.0 shares with it
and swaps in each 0.32.0 component as it is built (this package holds them). `NOT_BUILT` names,
by section of the spec, what a run on this release does not model yet; the CLI says so on every
run that picks it, and `docs/not-built-yet.md` keeps the same list. It is the default release
all the same: until the list is empty, a run that names no release is a preview.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents_core.agent_tools.components import AgentTools
from agents_core.facets import Facets
from agents_core.fiber_ledger import FiberLedger
from agents_core.keep_alive import KeepAlive
from agents_core.releases.runtime import Runtime
from agents_core.releases.v0_32.agent_schema import AGENT_DDL, AgentSchema
from agents_core.releases.v0_32.event_delivery import TerminalDelivery
from agents_core.releases.v0_32.fiber_outcomes import OutcomeFiberRunner
from agents_core.releases.v0_32.finished_rows import FinishedRowRecovery
from agents_core.releases.v0_32.host_jobs import HostJobs
from agents_core.releases.v0_32.lifecycle import Lifecycle
from agents_core.releases.v0_32.mcp_schema import KeyedMcp
from agents_core.releases.v0_32.queue import QueueCapability
from agents_core.releases.v0_32.replay_numbering import MilestoneReplay
from agents_core.releases.v0_32.scheduler import Scheduler
from agents_core.releases.v0_32.state import CapabilityStarts, StateCapability
from agents_core.releases.v0_32.tasks import TASKS_CAPABILITY, Tasks, declared_on
from agents_core.schedule_dispatch import ScheduleDispatch

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.runtime import AgentPorts

__all__ = ["NAME", "NOT_BUILT", "SCHEMA", "build"]

NAME = "0.32.0"

NOT_BUILT: tuple[str, ...] = (
    "§2.5, §3.5 and §6.5 Task runs accepted on a sub-agent (their wake routed to the root's "
    "queue as task:<ownerKey>:<runId>, the route's syncWake, dispatch and memoryLimit messages), "
    "and with them the breaker's policy for such a run and the root tracking its dispatch as "
    "alarm work; a sub-agent's chat recovery continuations, which the SDK runs as such routed "
    "Task runs, are schedules here (docs/divergences.md T15)",
    "§6.5 of a Task step callback that ignores its signal, two forms: the caller of an attached "
    "run (the chat turn's) goes on at the abandoned callback's next wake, not at the step's "
    "timeout or cancel, and a step the handler runs in a task of its own (under gather) ends "
    "only then (docs/divergences.md T18)",
    "§8.1 of chat recovery as the dist has it beyond the spec: the wake saving the partial "
    "answer and completing the stream before it schedules (T17) and onChatRecovery's persist: "
    "false, a separate _chatRecoveryRetry path, and a client's cancel aborting the running "
    "turn",
    "§8.2 the recovering outcome replayed to a client that reconnects over the resume "
    "handshake (T16)",
    "§8 the storage of @cloudflare/ai-chat 0.12.2, the chat release built for 0.32.0: Sessions "
    "(cf_agents_session_* tables, and the lift of cf_ai_chat_agent_messages into them) and "
    "streams packed in cf_agents_streams / cf_agents_stream_blocks",
)
"""What of 0.32.0 a run does not model yet (a run on this release behaves as 0.21.0 there)."""


SCHEMA = AgentSchema(AGENT_DDL)
"""Version 14 in KV. The state table is the State capability's (`state.py`); the schedules are
jobs (the Scheduler moves a 0.21.0 table into them)."""


DELIVERY = TerminalDelivery()
"""Agent tools' `event_delivery` and positionless chunks."""


def build(
    context: AgentContext, agent: AgentPorts, self_path: list[dict[str, str]], owner_key: str
) -> Runtime:
    """The components of one agent on 0.32.0, in 0.21.0's order (`v0_21`), with each one
    0.32.0 changed swapped in as it is built (what is not yet: `NOT_BUILT`): the FiberRunner
    that writes a fiber's outcome into its run row, the Recovery that settles finished rows
    quietly, the schema of version 14, MCP and State under their own schema keys, the
    Lifecycle with the job queue and its driver behind the alarm, keepAlive, housekeeping and
    destroy as its host jobs, the Scheduler on jobs, the Queue on jobs (installed right after
    the Scheduler, and pruned with a sub-tree's schedules), the Tasks capability (`tasks.py`, the
    agent's `task_definitions` its definitions), agent tools' event delivery and replay
    numbering."""
    mcp = KeyedMcp(context, agent._broadcast_protocol)
    state = StateCapability(context)
    lifecycle = Lifecycle(context, agent, CapabilityStarts(mcp, state))
    keep_alive = KeepAlive(context, lifecycle, owner_key)
    fiber_ledger = FiberLedger(context)
    fibers = OutcomeFiberRunner(context, fiber_ledger, keep_alive, lifecycle, agent)
    recovery = FinishedRowRecovery(context, fibers, fiber_ledger, agent)
    scheduler = Scheduler(context, lifecycle, agent, self_path, owner_key)
    lifecycle.use(scheduler)
    queue = QueueCapability(context, lifecycle, agent, self_path, owner_key)
    lifecycle.use(queue)
    lifecycle.use(Tasks(context, lifecycle, agent.on_error, declared_on(agent)))
    dispatch = ScheduleDispatch(context, lifecycle, agent)
    facets = Facets(
        context,
        agent,
        self_path,
        lifecycle=lifecycle,
        keep_alive=keep_alive,
        recovery=recovery,
        dispatch=dispatch,
        scheduler=scheduler,
        run_routed=scheduler.execute_routed,
        # After the schedules, in the SDK's `cleanupPrefix` order: the wakes of Task runs a
        # pruned sub-tree routed here (its runs are its own rows), then its queue items.
        prune_owned=(
            lifecycle.jobs_for(TASKS_CAPABILITY).cancel_routed_under,
            queue.drop_owned_under,
        ),
        prune_last=True,
    )
    host_jobs = HostJobs(
        context,
        lifecycle,
        keep_alive,
        [recovery._recovery_alarm_candidates, facets._facet_lease_candidates],
        lambda: facets._destroyed,
    )
    lifecycle.install_host_jobs(host_jobs)
    tools = AgentTools(
        context,
        agent,
        lifecycle=lifecycle,
        keep_alive=keep_alive,
        delivery=DELIVERY,
        replay=MilestoneReplay,
    )
    lifecycle.install_agent_tools(tools)
    return Runtime(
        mcp=mcp,
        lifecycle=lifecycle,
        keep_alive=keep_alive,
        fiber_ledger=fiber_ledger,
        fibers=fibers,
        recovery=recovery,
        scheduler=scheduler,
        schedule_dispatch=dispatch,
        queue=queue,
        facets=facets,
        tools=tools,
        state=state,
        schema=SCHEMA,
    )
