"""Each release the runtime models picks its chat components (`agents_core.chat.chat_releases`),
and a chat host is built with its release's: 0.32.0's recovery has the interrupted-attempts
bound, 0.21.0's has not."""

from __future__ import annotations

import pytest

from agents_core.chat.chat_recovery import ChatRecovery
from agents_core.chat.chat_releases import CHAT_RELEASES
from agents_core.chat.interrupted_attempts import InterruptedAttemptsRecovery
from agents_core.releases.registry import RELEASES
from sim import Simulation
from tests.chat.chat_agents import AiChatChild


def test_every_release_has_its_chat_components() -> None:
    assert list(CHAT_RELEASES) == list(RELEASES)


@pytest.mark.parametrize(
    ("sdk", "recovery"), [("0.21.0", ChatRecovery), ("0.32.0", InterruptedAttemptsRecovery)]
)
def test_a_chat_host_is_built_with_its_releases_recovery(sdk: str, recovery: type) -> None:
    with Simulation(seed=1, sdk=sdk) as sim:
        ref = sim.agent(AiChatChild, "c")
        sim.run_for(10)
        assert type(sim.instance_of(ref)._chat_recovery) is recovery
