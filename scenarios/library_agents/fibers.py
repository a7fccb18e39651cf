"""Library agents for the seed page "durable execution with fibers" (seed 002).

A research fiber that checkpoints every step (a poisoned variant whose hook always throws, and
a slow one whose hook takes seconds), a batch job run inline in an alarm handler, a webhook
receiver accepting managed fibers by idempotency key (and a strict variant that resolves by
hand), a cancellable export, and a cron digest. Each is as small as its story needs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents_core import Request, Response
from scenarios.library_agents.story import StoryAgent

__all__ = [
    "Batcher",
    "Digest",
    "Exporter",
    "PoisonedResearcher",
    "Researcher",
    "SlowRecoveryResearcher",
    "StrictWebhooks",
    "Webhooks",
]


class Researcher(StoryAgent):
    """The seed's research agent: slow steps in a fiber, a full checkpoint after each, and a
    recovery hook that resumes the pending steps in a new fiber. Each finished step is one row of
    `steps`; `resumes` records every hook call that got as far as resuming."""

    steps: ClassVar[list[str]] = ["search", "analyze", "synthesize"]
    step_ms: ClassVar[int] = 10_000

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS steps (step TEXT NOT NULL, at INTEGER NOT NULL)")
        self.sql("CREATE TABLE IF NOT EXISTS resumes (pending INTEGER, at INTEGER NOT NULL)")

    async def research(self, topic: str) -> None:
        """Fire and forget: nobody awaits the fiber (the caller returns at once)."""
        self._spawn(topic, [], {}, list(self.steps))

    async def progress(self) -> list[str]:
        """The steps done so far (an async method a dashboard calls over RPC)."""
        done = [row["step"] for row in self.sql("SELECT step FROM steps ORDER BY at")]
        self._note("progress", done=done)
        return done

    async def research_later(self, delay_s: int, topic: str) -> None:
        """Schedule the research `delay_s` from now (a background agent's own timer)."""
        await self.schedule(delay_s, "begin_scheduled", {"topic": topic})

    async def begin_scheduled(self, payload: Any = None, row: Any = None) -> None:
        await self.research(payload["topic"])

    def _spawn(self, topic: str, completed: list[str], results: dict, pending: list[str]) -> None:
        async def steps(ctx: Any) -> None:
            for index, step in enumerate(pending):
                await self.host.clock.sleep(int(self.step_ms))
                results[step] = f"{step} of {topic}"
                completed.append(step)
                self.sql("INSERT INTO steps VALUES (?, ?)", step, self.host.clock.now_ms())
                self._note("step", step=step)
                ctx.stash(
                    {
                        "topic": topic,
                        "completed": completed,
                        "results": results,
                        "pendingSteps": pending[index + 1 :],
                    }
                )
            self.set_state({"topic": topic, "result": results})
            self._note("finished", steps=len(completed))

        self.host.tasks.wait_until(self.run_fiber("research", steps))

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        if ctx.name != "research":
            return await super().on_fiber_recovered(ctx)
        snapshot = ctx.snapshot or {}
        pending = snapshot.get("pendingSteps", list(self.steps))
        # Written before resuming: a storage fault here fails the hook, and the row must stay
        # for the next scan (seed: "protects against transient storage failures").
        self.sql("INSERT INTO resumes VALUES (?, ?)", len(pending), self.host.clock.now_ms())
        self._note("recovered", completed=snapshot.get("completed", []), pending=pending)
        if pending:
            self._spawn(
                snapshot.get("topic", "?"),
                list(snapshot.get("completed", [])),
                dict(snapshot.get("results", {})),
                list(pending),
            )
        return None


class PoisonedResearcher(Researcher):
    """Its recovery hook always throws (a poison row). Each attempt notes how its delay compares
    with the previous one in this incarnation: `first`, `same-wake` (startup and the alarm's own
    housekeeping in one wake), `grew`, `capped` (at the 5-minute ceiling), or the failures
    `flat` and `shrank` (a busy loop, or a backoff that went backwards)."""

    backoff_cap_ms: ClassVar[int] = 300_000

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._last_attempt_ms: int | None = None
        self._last_gap_ms: int | None = None

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        now = self.host.clock.now_ms()
        gap = None if self._last_attempt_ms is None else now - self._last_attempt_ms
        if gap is None:
            backoff = "first"
        elif gap == 0:
            backoff = "same-wake"
        elif self._last_gap_ms in (None, 0) or gap > self._last_gap_ms:
            backoff = "grew"
        elif gap == self.backoff_cap_ms:
            backoff = "capped"
        else:
            backoff = "flat" if gap == self._last_gap_ms else "shrank"
        self._last_attempt_ms = now
        if gap:
            self._last_gap_ms = gap
        self._note("hook-attempt", backoff=backoff, age_ms=now - ctx.created_at)
        raise RuntimeError(f"cannot recover {ctx.name}: the upstream rejects this input")


class SlowRecoveryResearcher(Researcher):
    """Its recovery hook re-reads the topic's sources (`recover_ms`) before it resumes, so
    recovering many orphans takes long enough for the scan's soft deadline to stop a pass."""

    recover_ms: ClassVar[int] = 4_000

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        await self.host.clock.sleep(int(self.recover_ms))
        return await super().on_fiber_recovered(ctx)


class Batcher(StoryAgent):
    """Runs `batches` batches of `batch_ms` each inline in a scheduled callback (an alarm
    handler), committing each; a retried handler goes on after the last committed batch."""

    batches: ClassVar[int] = 20
    batch_ms: ClassVar[int] = 60_000

    async def plan(self, delay_s: int) -> None:
        await self.schedule(delay_s, "run_batches")

    async def run_batches(self, payload: Any = None, row: Any = None) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS batches (n INTEGER, at INTEGER, inc INTEGER)")
        done = self.sql("SELECT count(*) AS n FROM batches")[0]["n"]
        self._note("handler-start", resume_from=done)
        for n in range(done, int(self.batches)):
            await self.host.clock.sleep(int(self.batch_ms))
            self.sql(
                "INSERT INTO batches VALUES (?, ?, ?)",
                n,
                self.host.clock.now_ms(),
                self.host.incarnation_number,
            )
            self._note("batch", n=n)
        self._note("handler-done", batches=int(self.batches))


class Webhooks(StoryAgent):
    """The seed's webhook receiver: a delivery is accepted with `start_fiber` under the
    webhook's idempotency key and answered 202 (accepted) or 200 (a duplicate); the fiber posts
    the reply. The recovery hook posts the reply itself and records the fiber completed."""

    reply_ms: ClassVar[int] = 5_000

    async def on_request(self, request: Request) -> Response:
        body = request.body or {}
        webhook_id, thread_id = body["webhookId"], body["threadId"]

        async def reply(ctx: Any) -> None:
            ctx.stash({"webhookId": webhook_id, "threadId": thread_id})
            await self.host.clock.sleep(int(self.reply_ms))
            self._note("reply", thread=thread_id, via="live")

        receipt = await self.start_fiber(
            "reply-to-webhook",
            reply,
            idempotency_key=f"webhook:{webhook_id}",
            metadata={"threadId": thread_id},
        )
        self._note("receipt", accepted=receipt.accepted, status=receipt.status)
        return Response(202 if receipt.accepted else 200, receipt.to_dict())

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        if ctx.name != "reply-to-webhook":
            return await super().on_fiber_recovered(ctx)
        snapshot = ctx.snapshot or {}
        self._note("reply", thread=snapshot.get("threadId"), via="recovery")
        return {"status": "completed", "snapshot": {**snapshot, "recovered": True}}


class StrictWebhooks(Webhooks):
    """A receiver whose recovery hook cannot post (it throws), so an interrupted delivery stays
    `interrupted` with the hook's error on record (seed decision S1). The next duplicate
    delivery does the recovery at the application level: it posts the reply and settles the
    fiber with `resolve_fiber`."""

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        raise RuntimeError("the chat API is unavailable during recovery")

    async def on_request(self, request: Request) -> Response:
        response = await super().on_request(request)
        receipt = response.body
        if receipt["status"] == "interrupted":
            thread = (receipt.get("metadata") or {}).get("threadId")
            self._note("reply", thread=thread, via="duplicate", seen_error=receipt.get("error"))
            resolved = self.resolve_fiber(receipt["fiberId"], {"status": "completed"})
            self._note("resolved", resolved=resolved)
        return response


class Exporter(StoryAgent):
    """A managed export of `parts` parts, `part_ms` apart, accepted once per key. Cancellation
    is cooperative: the callback looks at its signal before every visible side effect."""

    parts: ClassVar[int] = 6
    part_ms: ClassVar[int] = 20_000

    async def start_export(self, key: str) -> dict[str, Any]:
        async def export(ctx: Any) -> None:
            for part in range(int(self.parts)):
                await self.host.clock.sleep(int(self.part_ms))
                if ctx.signal.aborted:
                    self._note("export-stopped", key=key, before_part=part)
                    return
                self._note("part", key=key, n=part)
                ctx.stash({"parts": part + 1})
            self._note("published", key=key)

        receipt = await self.start_fiber("export", export, idempotency_key=key)
        self._note("receipt", key=key, accepted=receipt.accepted, status=receipt.status)
        return receipt.to_dict()

    async def cancel_export(self, key: str, reason: str = "no longer needed") -> bool:
        cancelled = self.cancel_fiber_by_key(key, reason)
        self._note("cancel", key=key, cancelled=cancelled)
        return cancelled

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        self._note("recovered", key=ctx.idempotency_key, status=ctx.status)
        return None


class Digest(StoryAgent):
    """A cron job: `setup` schedules `digest` on `cron` (idempotent: calling it again adds no
    row); each run writes one `digests` row with its wall-clock minute."""

    cron: ClassVar[str] = "*/10 * * * *"

    async def setup(self) -> str:
        schedule = await self.schedule(self.cron, "digest")
        return schedule.type

    async def digest(self, payload: Any = None, row: Any = None) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS digests (minute INTEGER, inc INTEGER)")
        minute = self.host.clock.now_ms() // 60_000
        self.sql("INSERT INTO digests VALUES (?, ?)", minute, self.host.incarnation_number)
        self._note("digest", minute=minute)
