"""A 0.32.0 chat turn whose Task run settles before its body runs (its first attempt fails at
its start): the turn's caller is told so and the host's keepAlive is given back, where the
caller used to wait for ever on a body that would never run, its keepAlive held (found by
agentsim generate: the liveness phase never went quiet)."""

from __future__ import annotations

import pytest

from sim import Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_release

STEPS_READ = r"^SELECT COUNT\(\*\) AS count FROM cf_agents_task_steps"


@on_release("0.32.0")
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_turn_whose_task_run_ended_unrun_fails_and_lets_go(sim: Simulation, host: type) -> None:
    model = sim.register_model(ScriptedModel(default=text("answer")))
    ref = sim.agent(host, "c")
    sim.arm_storage_fault(ref, "error", match=STEPS_READ)
    pending = sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(60_000)
    assert pending.done()
    (failed,) = sim.trace.select("task:failed", definition="__cf_internal_chat_turn")
    assert failed.get("error") == "StorageError"
    assert model.requests == []
    acquired = sim.trace.select("keep_alive:acquire", agent=ref.path)
    released = sim.trace.select("keep_alive:release", agent=ref.path)
    assert len(acquired) == len(released)
    # The next turn runs as usual.
    sim.wait(sim.start_call(ref, "save_messages", [user("again")]))
    assert len(model.requests) == 1
