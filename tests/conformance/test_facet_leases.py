"""A sub-agent that died on its own, its root alive, gets its dead incarnation's keepAlive leases
dropped from the root as soon as a new incarnation of it is constructed, however it is started:
by a resolution (startup runs) or by a plain RPC on a stub (startup does not run) (F3)."""

from __future__ import annotations

import pytest

from sim import Simulation
from tests.conformance.sub_agent_fixtures import Child, Root, root_instance


@pytest.mark.parametrize("restart", ["resolve", "plain-rpc"])
def test_a_facet_evicted_alone_gives_its_dead_leases_back_on_its_next_incarnation(
    sim: Simulation, restart: str
) -> None:
    root = sim.agent(Root, "r")
    sim.call(root, "at", [(Child, "c")], "hold")
    sim.run_for(10)
    instance = root_instance(sim, root)
    assert instance._keep_alive_refs == 1
    child = sim.facet(root, Child, "c")
    sim.evict(child)
    assert instance._keep_alive_refs == 1, "the dead child's lease is still counted"
    if restart == "resolve":
        sim.call(root, "at", [(Child, "c")], "note_all", "woke", [1])
    else:
        sim.call(child, "note_all", "woke", [1])  # a stale stub: no startup in the child
        starts = [r for r in sim.trace.select("startup:begin", agent=child.path) if r.inc == 2]
        assert starts == []
    sim.run_for(10)
    assert instance._keep_alive_refs == 0
    assert sim.probes.get("facet.dead_incarnation_leases_released") == 1
    sim.run_for(120_000)
    assert sim.alarm_of(root) is None
