"""`HostJobs`: keepAlive, housekeeping and destroy as the agent's own jobs on 0.32.0 (spec
sdk-0.32 §3.4, §4).

0.32.0 has no alarm candidates: what used to ask the alarm for a moment now holds a job of owner
`host`, re-derived by `sync` (the SDK's `_syncHostJobs`) whenever that state changes, at the end
of startup and at the end of every alarm:
- `cf:destroy` (fn `destroy`, exclusive) while a deferred destroy is pending; once it is pushed
  the others are left as they are;
- `cf:keep-alive` (fn `keepAlive`) at `now + keep_alive_interval_ms` while a lease is held, so
  every sync slides it; its dispatch re-times it by one interval while leases are held, and
  deletes it once none is (the heartbeat an evicted isolate left behind);
- `cf:housekeeping` (fn `housekeeping`) at the earlier of the recovery follow-up (with its
  backoff) and the sub-agents' fiber-lease wake; its dispatch only re-times or deletes it, the
  scan itself runs in the alarm's housekeeping.
A sub-agent has no alarm: its sync cancels any host job of its own and leaves the rest to its
root. Nothing here emits an observability event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.keep_alive import KeepAlive
    from agents_core.releases.v0_32.job_queue import Job
    from agents_core.releases.v0_32.lifecycle import Lifecycle

__all__ = ["HOST_JOB_DESTROY_ID", "HOST_JOB_HOUSEKEEPING_ID", "HOST_JOB_KEEP_ALIVE_ID", "HostJobs"]

HOST_JOB_KEEP_ALIVE_ID = "cf:keep-alive"
HOST_JOB_HOUSEKEEPING_ID = "cf:housekeeping"
HOST_JOB_DESTROY_ID = "cf:destroy"

WakeSource = Callable[[int], list[int]]


class HostJobs:
    """One agent's host jobs: their sync and their dispatch (one per incarnation)."""

    __slots__ = ("_ctx", "_lifecycle", "_keep_alive", "_wakes", "_destroyed")

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        keep_alive: KeepAlive,
        housekeeping_wakes: list[WakeSource],
        destroyed: Callable[[], bool],
    ) -> None:
        self._ctx = ctx
        self._lifecycle = lifecycle
        self._keep_alive = keep_alive
        self._wakes = housekeeping_wakes
        """The moments housekeeping needs the agent: the recovery follow-up (with its
        backoff) and the sub-agents' fiber leases (0.21.0's alarm sources of the same)."""
        self._destroyed = destroyed

    def next_housekeeping_wake(self, now: int) -> int | None:
        """The SDK's `_nextHousekeepingWakeMs`: the earliest wake housekeeping asks for."""
        moments: list[int] = []
        for source in self._wakes:
            moments += source(now)
        return min(moments) if moments else None

    async def sync(self) -> None:
        """Re-derive the host jobs from the agent's state (`_syncHostJobs`)."""
        if self._destroyed():
            return
        jobs = self._lifecycle.jobs
        ctx = self._ctx
        if ctx.is_facet:
            for id in (HOST_JOB_DESTROY_ID, HOST_JOB_KEEP_ALIVE_ID, HOST_JOB_HOUSEKEEPING_ID):
                if jobs.get(id) is not None:
                    await jobs.cancel(id)
            return
        now = ctx.host.clock.now_ms()
        if ctx.memo.destroy_pending():
            await jobs.push("destroy", now, id=HOST_JOB_DESTROY_ID, exclusive=True)
            return
        if jobs.get(HOST_JOB_DESTROY_ID) is not None:
            await jobs.cancel(HOST_JOB_DESTROY_ID)
        if self._keep_alive.refs > 0:
            interval = ctx.options.keep_alive_interval_ms
            await jobs.push("keepAlive", now + interval, id=HOST_JOB_KEEP_ALIVE_ID)
        elif jobs.get(HOST_JOB_KEEP_ALIVE_ID) is not None:
            await jobs.cancel(HOST_JOB_KEEP_ALIVE_ID)
        at = self.next_housekeeping_wake(now)
        if at is not None:
            await jobs.push("housekeeping", at, id=HOST_JOB_HOUSEKEEPING_ID)
        elif jobs.get(HOST_JOB_HOUSEKEEPING_ID) is not None:
            await jobs.cancel(HOST_JOB_HOUSEKEEPING_ID)

    async def on_job(self, job: Job, attempt: int) -> Any:
        """A host job is due (`onJob`): its outcome; the destroy itself runs before the jobs."""
        ctx = self._ctx
        now = ctx.host.clock.now_ms()
        if job.fn == "keepAlive":
            if self._keep_alive.refs > 0:
                return {"rescheduleAt": now + ctx.options.keep_alive_interval_ms}
            return None
        if job.fn == "housekeeping":
            at = self.next_housekeeping_wake(now)
            return None if at is None else {"rescheduleAt": at}
        if job.fn == "destroy":
            return None
        ctx.log("warn", f'Unknown Agent host job fn "{job.fn}"')
        return None
