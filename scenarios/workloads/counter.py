"""`Counter`: the smallest workload, named by import path (`scenarios.workloads:Counter`).

It counts. Each count is one turn that inserts a row into `counts` and updates the persisted
state together, so a fault or an eviction can only ever lose a whole count, never half of one:
after any run the row count and `state.count` agree, and scenarios check exactly that. `work`
counts in steps `step_ms` apart (a class attribute a scenario can set), which gives a deploy or
an eviction something to interrupt.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents_core import Agent, Request, Response

__all__ = ["Counter"]

COUNTS_DDL = (
    "CREATE TABLE IF NOT EXISTS counts ("
    "id INTEGER PRIMARY KEY, source TEXT NOT NULL, at_ms INTEGER NOT NULL)"
)


class Counter(Agent):
    """Counts calls, work steps, alarms and messages; one row and one state update per count."""

    initial_state: ClassVar[Any] = {"count": 0}
    step_ms: ClassVar[int] = 1_000
    """Sleep between two counts of `work` (a scenario sets it: `options: {step_ms: 20s}`)."""
    alarm_work_ms: ClassVar[int] = 0
    """How long the alarm handler works after its count (`options: {alarm_work_ms: 20m}`): past
    15 minutes the platform kills it and retries, which shows the alarm limit without code."""

    async def on_start(self) -> None:
        self.sql(COUNTS_DDL)

    def _count(self, source: str) -> int:
        # The table is (re)declared here too: a plain RPC on a stale stub starts an incarnation
        # without `on_start`, and the first count may come that way.
        self.sql(COUNTS_DDL)
        self.sql(
            "INSERT INTO counts (source, at_ms) VALUES (?, ?)", source, self.host.clock.now_ms()
        )
        count = int(self.state["count"]) + 1
        self.set_state({**self.state, "count": count})
        return count

    async def increment(self) -> int:
        """One count, now; returns the new count."""
        return self._count("increment")

    async def work(self, steps: int = 5) -> int:
        """`steps` counts, each followed by a sleep of `step_ms`; returns the last count."""
        count = int(self.state["count"])
        for _ in range(steps):
            count = self._count("work")
            await self.host.clock.sleep(int(self.step_ms))
        return count

    async def fail(self, message: str = "asked to fail") -> None:
        """Raise, so scenarios can show how an unexpected error is reported."""
        raise RuntimeError(message)

    async def arm(self, after_ms: int) -> int:
        """Arm the alarm `after_ms` from now; returns the alarm time."""
        at_ms = self.host.clock.now_ms() + after_ms
        self.host.alarm.set_alarm(at_ms)
        return at_ms

    async def on_alarm(self) -> None:
        # The runtime's hook inside its alarm entry; `alarm` itself is the runtime's multiplexer
        # and must stay in charge of re-arming the slot.
        self._count("alarm")
        if self.alarm_work_ms > 0:
            await self.host.clock.sleep(int(self.alarm_work_ms))

    async def on_request(self, request: Request) -> Response:
        if request.method == "GET":
            return Response(200, {"count": self.state["count"]})
        if request.method == "POST":
            return Response(200, {"count": self._count("request")})
        return Response(405, f"method {request.method} not allowed; use GET or POST")

    async def on_message(self, connection: Any, message: Any) -> None:
        if message == "increment":
            connection.send({"type": "count", "count": self._count("message")})
        else:
            connection.send({"type": "error", "error": f"unknown message {message!r}"})
