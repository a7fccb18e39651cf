"""`agents@0.32.0` (2026-10-29): the release that rebuilt the alarm layer (spec `sdk-0.32.md`).

It is modelled in part, as a preview: `build` starts from the components 0.21.0 shares with it
and swaps in each 0.32.0 component as it is built (this package holds them). `NOT_BUILT` names,
by section of the spec, what a run on this release does not model yet; the CLI says so on every
run that picks it, and `docs/not-built-yet.md` keeps the same list. Until it is empty the
default release stays 0.21.0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents_core.releases import v0_21

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.runtime import AgentPorts, Runtime

__all__ = ["NAME", "NOT_BUILT", "build"]

NAME = "0.32.0"

NOT_BUILT: tuple[str, ...] = (
    "§1 the Lifecycle that owns the alarm (startup status, buffered events, fallback, deadman)",
    "§2 the job queue cf_agents_jobs and its driver (backlog, slow dispatch, platform failures)",
    "§3 the Scheduler on jobs (the timing envelope, schedule:* as 0.32.0 emits them)",
    "§3.4/§4 keepAlive, housekeeping and destroy as host jobs",
    "§5 the run rows' outcome columns and the recovery of finished rows",
    "§6 schema version 14 in KV and the migrations to jobs",
    "§7 eventDelivery and positionless chunks of agent tools",
    "§8 chat recovery always on, with its new limits and the recovering outcome",
)
"""What of 0.32.0 a run does not model yet (a run on this release behaves as 0.21.0 there)."""


def build(
    context: AgentContext, agent: AgentPorts, self_path: list[dict[str, str]], owner_key: str
) -> Runtime:
    """The components of one agent on 0.32.0: 0.21.0's, with each one 0.32.0 changed swapped
    in as it is built (none yet: see `NOT_BUILT`)."""
    return v0_21.build(context, agent, self_path, owner_key)
