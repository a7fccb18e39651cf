"""The upgrade: a deploy that brings a newer SDK release (`Simulation.deploy(sdk=...)`).

After it the platform's release is the new one and every incarnation that starts after it,
roots and the facets in their isolates, runs it; one already running when it lands is killed
by it, as by any deploy. Its record says so (`platform:deploy` with `sdk`), and only then: a
plain deploy's record is as it always was. A downgrade and an unknown release are refused.
"""

from __future__ import annotations

import pytest

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from sim import Simulation
from sim.upgrades import UpgradeRefused, newer_releases, upgrade_refusal
from tests.unit.release_agents import ReleaseReporter

OLD, NEW = list(RELEASES)[0], list(RELEASES)[-1]


def test_incarnations_started_after_an_upgrade_run_the_new_release_roots_and_facets() -> None:
    with Simulation(seed=1, sdk=OLD) as sim:
        agent = sim.agent(ReleaseReporter, "a")
        assert sim.call(agent, "release") == OLD
        assert sim.call(agent, "child_release") == OLD
        killed = sim.deploy(sdk=NEW)
        assert sim.release == NEW
        assert "ReleaseReporter/a" in killed
        assert sim.call(agent, "release") == NEW
        assert sim.call(agent, "child_release") == NEW
        deploys = [r for r in sim.trace if r.event == "platform:deploy"]
        assert [r.fields.get("sdk") for r in deploys] == [NEW]


def test_a_deploy_on_the_same_release_records_no_sdk_field() -> None:
    with Simulation(seed=1, sdk=OLD) as sim:
        agent = sim.agent(ReleaseReporter, "a")
        sim.call(agent, "release")
        sim.deploy(sdk=OLD)
        sim.deploy()
        deploys = [r for r in sim.trace if r.event == "platform:deploy"]
        assert len(deploys) == 2
        assert all("sdk" not in r.fields for r in deploys)
        assert sim.call(agent, "release") == OLD


def test_a_plain_deploy_keeps_its_trace_byte_for_byte() -> None:
    def run(**deploy: str) -> str:
        with Simulation(seed=3) as sim:
            agent = sim.agent(ReleaseReporter, "a")
            sim.call(agent, "release")
            sim.deploy(**deploy)
            sim.call(agent, "release")
            return sim.digest()

    assert run() == run(sdk=DEFAULT_RELEASE)


def test_a_downgrade_is_refused_and_changes_nothing() -> None:
    with Simulation(seed=1, sdk=NEW) as sim:
        agent = sim.agent(ReleaseReporter, "a")
        sim.call(agent, "release")
        with pytest.raises(UpgradeRefused, match="downgrade"):
            sim.deploy(sdk=OLD)
        assert sim.release == NEW
        assert not [r for r in sim.trace if r.event == "platform:deploy"]
        assert sim.call(agent, "release") == NEW


def test_an_unknown_release_is_refused_with_the_list_of_releases() -> None:
    with Simulation(seed=1) as sim, pytest.raises(UpgradeRefused) as refused:
        sim.deploy(sdk="0.99.0")
    assert "'0.99.0'" in str(refused.value)
    assert all(name in str(refused.value) for name in RELEASES)


def test_the_releases_an_upgrade_may_bring_are_the_newer_ones() -> None:
    assert newer_releases(OLD) == tuple(list(RELEASES)[1:])
    assert newer_releases(NEW) == ()
    assert upgrade_refusal(OLD, NEW) is None
    assert upgrade_refusal(NEW, NEW) is None
    assert upgrade_refusal(NEW, OLD) is not None
