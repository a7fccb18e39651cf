"""Conformance: startup runs behind the input gate (spec fibers §1.4, `blockConcurrencyWhile`).

While a startup's `on_start` is still awaiting, no other event reaches the agent: a request (a
startup trigger) and a plain RPC on a stub (not a trigger) both wait until startup is over.
"""

from __future__ import annotations

from agents_core import Agent, Request
from sim import Simulation
from tests.releases import on_both_releases

STARTUP_MS = 500


class SlowStart(Agent):
    """Writes what happens to it, in order, into a table that outlives incarnations."""

    def _note(self, what: str) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, what TEXT, at INT)")
        self.sql("INSERT INTO journal (what, at) VALUES (?, ?)", what, self.host.clock.now_ms())

    async def on_start(self) -> None:
        self._note("start begins")
        await self.host.clock.sleep(STARTUP_MS)
        self._note("start ends")

    async def ping(self) -> str:
        self._note("ping")
        return "pong"

    async def on_request(self, request: Request):
        self._note(f"request {request.path}")
        return await super().on_request(request)


def journal(sim: Simulation, ref) -> list[tuple[str, int]]:
    rows = sim.query(ref, "SELECT what, at FROM journal ORDER BY seq")
    return [(row["what"], row["at"]) for row in rows]


@on_both_releases
def test_a_plain_rpc_during_on_start_waits_behind_the_input_gate(sim: Simulation) -> None:
    """An RPC that arrives while `on_start` awaits runs only once startup has finished, never
    in between its two halves: on 0.21.0 it waits at the input gate, on 0.32.0 its `async`
    method joins the startup under way instead (sdk-0.32 §1.3, J-08)."""
    ref = sim.agent(SlowStart, "gate")  # get-by-name: startup begins, on_start sleeps
    sim.run_for(100)
    assert sim.call(ref, "ping") == "pong"
    assert journal(sim, ref) == [
        ("start begins", 0),
        ("start ends", STARTUP_MS),
        ("ping", STARTUP_MS),
    ]
    waited = 1 if sim.release == "0.21.0" else 0
    assert sim.probes.get("platform.delivery_waited_at_gate", 0) == waited
    (begin,) = sim.trace.select("delivery:begin", trigger="rpc")
    (done,) = sim.trace.select("startup:done")
    assert begin.seq > done.seq


def test_a_request_during_on_start_waits_behind_the_input_gate(sim: Simulation) -> None:
    """A request (itself a startup trigger) arriving mid-startup joins that startup and runs
    after it, without starting the agent a second time."""
    ref = sim.agent(SlowStart, "gate")
    sim.run_for(100)
    sim.fetch(ref, Request(path="/during"))
    assert journal(sim, ref) == [
        ("start begins", 0),
        ("start ends", STARTUP_MS),
        ("request /during", STARTUP_MS),
    ]
