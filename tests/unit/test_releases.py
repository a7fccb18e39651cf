"""A release is a choice of components: the host names the release, the agent builds its
components from that release, and a release the runtime does not model is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents_core import Agent
from agents_core.releases import v0_21
from agents_core.releases.registry import (
    DEFAULT_RELEASE,
    RELEASES,
    Release,
    UnknownRelease,
    release_named,
)
from sim import Simulation


class Plain(Agent):
    def which(self) -> str:
        return f"{self.host.release}/{self._release.name}"


def test_a_modelled_release_is_found_by_its_npm_version() -> None:
    release = release_named("0.21.0")
    assert (release.name, release.published) == ("0.21.0", "2026-08-18")
    assert DEFAULT_RELEASE in RELEASES


def test_an_unknown_release_is_refused_with_the_list_of_those_modelled() -> None:
    with pytest.raises(UnknownRelease) as caught:
        release_named("0.99.0")
    assert "'0.99.0' is not modelled" in str(caught.value)
    assert all(name in str(caught.value) for name in RELEASES)


def test_a_simulation_refuses_an_unknown_release_before_it_starts() -> None:
    with pytest.raises(UnknownRelease, match="0.99.0"):
        Simulation(seed=1, sdk="0.99.0")


def test_the_agent_runs_the_release_its_host_names() -> None:
    with Simulation(seed=1, sdk="0.21.0") as sim:
        assert sim.call(sim.agent(Plain, "a"), "which") == "0.21.0/0.21.0"
    with Simulation(seed=1) as sim:
        assert sim.call(sim.agent(Plain, "a"), "which") == f"{DEFAULT_RELEASE}/{DEFAULT_RELEASE}"


def test_a_release_builds_the_components_the_agent_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Swapping a release's build swaps what every agent is made of."""
    built: list[str] = []

    def build(context: Any, agent: Any, self_path: Any, owner_key: str) -> Any:
        built.append(context.name)
        return v0_21.build(context, agent, self_path, owner_key)

    monkeypatch.setitem(RELEASES, "9.0.0", Release("9.0.0", "2027-01-01", build))
    with Simulation(seed=1, sdk="9.0.0") as sim:
        assert sim.call(sim.agent(Plain, "a"), "which") == "9.0.0/9.0.0"
    assert built == ["a"]


def test_the_default_is_the_newest_release_and_says_what_of_it_is_not_built() -> None:
    """Users run the newest release, so it is the default even while parts of it are not
    built; a release is a preview exactly when it lists what it lacks."""
    assert DEFAULT_RELEASE == list(RELEASES)[-1] == "0.32.0"
    for name, release in RELEASES.items():
        assert release.preview == bool(release.not_built), name
    assert not release_named("0.21.0").preview


def test_what_0_32_lacks_is_listed_in_the_docs_as_in_the_code() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "not-built-yet.md").read_text()
    section = text.split("## SDK 0.32.0", 1)[1].split("\n## ", 1)[0]
    listed = [line[2:].rstrip(";.") for line in section.splitlines() if line.startswith("- ")]
    assert listed == list(release_named("0.32.0").not_built)
