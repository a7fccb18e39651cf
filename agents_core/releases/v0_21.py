"""`agents@0.21.0` (2026-08-18): the release the runtime was first ported from.

Its components, built in this order for every agent (the order is observable where a
constructor or an installed source touches storage): MCP; the Lifecycle, which owns the alarm
slot and asks its sources for candidates (0.21.0's `_scheduleNextAlarm`); KeepAlive, a
candidate of the alarm; the fiber ledger, runner and recovery; the Scheduler on
`cf_agents_schedules` and its dispatch; the Queue (`cf_agents_queues`, made on its first use);
the sub-agents (Facets); the agent tools. The alarm's sources are installed in 0.21.0's order:
the due schedules, the keepAlive heartbeat, the recovery follow-up, the sub-agents' fiber
leases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents_core.agent_tools.components import AgentTools
from agents_core.facets import Facets
from agents_core.fiber_ledger import FiberLedger
from agents_core.fibers import FiberRunner
from agents_core.keep_alive import KeepAlive
from agents_core.lifecycle import Lifecycle
from agents_core.mcp import Mcp
from agents_core.queue import Queue
from agents_core.recovery import Recovery
from agents_core.releases.runtime import Runtime
from agents_core.schedule_dispatch import ScheduleDispatch
from agents_core.schedules import Scheduler
from agents_core.schema import SCHEMA_V11
from agents_core.state_store import StateStore

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.runtime import AgentPorts

__all__ = ["NAME", "build"]

NAME = "0.21.0"


def build(
    context: AgentContext, agent: AgentPorts, self_path: list[dict[str, str]], owner_key: str
) -> Runtime:
    """The components of one agent on 0.21.0."""
    mcp = Mcp(context, agent._broadcast_protocol)
    lifecycle = Lifecycle(context, agent, mcp)
    keep_alive = KeepAlive(context, lifecycle, owner_key)
    fiber_ledger = FiberLedger(context)
    fibers = FiberRunner(context, fiber_ledger, keep_alive, lifecycle, agent)
    recovery = Recovery(context, fibers, fiber_ledger, agent)
    scheduler = Scheduler(context, lifecycle, agent, self_path, owner_key)
    dispatch = ScheduleDispatch(context, lifecycle, agent)
    queue = Queue(context, agent)
    facets = Facets(
        context,
        agent,
        self_path,
        lifecycle=lifecycle,
        keep_alive=keep_alive,
        recovery=recovery,
        dispatch=dispatch,
        scheduler=scheduler,
    )
    # The alarm's sources, in the order the Lifecycle asks them (observable: lifecycle.py).
    lifecycle.install(dispatch._schedule_alarm_candidates)
    lifecycle.install(keep_alive.alarm_candidates)
    lifecycle.install(recovery._recovery_alarm_candidates)
    lifecycle.install(facets._facet_lease_candidates)
    tools = AgentTools(context, agent, lifecycle=lifecycle, keep_alive=keep_alive)
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
        state=StateStore(context),
        schema=SCHEMA_V11,
    )
