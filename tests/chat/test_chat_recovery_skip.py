"""`on_chat_recovery` answering `skip` for an interrupted turn, on each release: 0.32.0 (as
@cloudflare/ai-chat 0.12.2's `continue: false`) keeps the incident `skipped` with the reason
`continue_disabled` and reports `chat:recovery:skipped`; 0.21.0 marks it `failed`."""

from __future__ import annotations

from typing import Any

import pytest

from agents_core.chat.chat_recovery import INCIDENT_PREFIX
from sim import Simulation
from sim.model import ScriptedModel, text
from tests.chat.chat_agents import HOSTS, user
from tests.releases import on_both_releases


@on_both_releases
@pytest.mark.parametrize("host", HOSTS, ids=lambda c: c.__name__)
def test_a_skipped_recovery_on_each_release(sim: Simulation, host: type) -> None:
    """The interrupted turn is not recovered (no second model call) and the recovering flag is
    cleared; the incident's end is the release's."""

    class Skipping(host):  # type: ignore[valid-type, misc]
        async def on_chat_recovery(self, ctx: Any) -> str | None:
            return "skip"

    model = sim.register_model(ScriptedModel(default=text("the answer", chunks=4, delay_ms=1_000)))
    ref = sim.agent(Skipping, "c")
    sim.start_call(ref, "save_messages", [user("go")])
    sim.run_for(2_500)
    sim.evict(ref)
    sim.agent(Skipping, "c")
    sim.run_for(30_000)
    (stored,) = sim.instance_of(ref).host.kv.list(INCIDENT_PREFIX).values()
    skipped = sim.trace.select("chat:recovery:skipped")
    if sim.platform.release == "0.21.0":
        assert stored["status"] == "failed"
        assert skipped == []
    else:
        assert (stored["status"], stored["reason"]) == ("skipped", "continue_disabled")
        assert [r.get("reason") for r in skipped] == ["continue_disabled"]
        assert sim.trace.select("chat:recovery:failed") == []
        assert sim.instance_of(ref).host.kv.get("cf:chat:recovering") is None
    assert len(model.requests) == 1
