"""The plugin's failure section shows the lines that matter: repeated keepAlive heartbeats
fold into one line, and a deploy, an eviction and the records an invariant violation names
stay in view even when they fall before the last lines."""

from __future__ import annotations

from pathlib import Path

from tests.plugin.test_plugin import CONFTEST, _pytest

AGENT = """\
from agents_core import Agent


class Busy(Agent):
    async def poke(self) -> None:
        self.host.trace.emit("user:bad", why="poked")

    async def hold(self) -> None:
        self._release = await self.keep_alive()

    async def note(self, n: int) -> None:
        self.host.trace.emit("user:note", n=n)
"""

TESTS = """\
from agents import Busy


def test_heartbeats(sim):
    ref = sim.agent(Busy, "b")
    sim.call(ref, "poke")
    sim.call(ref, "hold")
    sim.run_for(600_000)
    sim.deploy()
    sim.call(ref, "hold")
    sim.run_for(1_200_000)
    for n in range(5):
        sim.call(ref, "note", n)
"""


def _section(tmp_path: Path) -> str:
    (tmp_path / "agents.py").write_text(AGENT)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_user.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = _pytest(tmp_path, "--agentsim-invariants", "no_bad_records")
    assert done.returncode == 1, done.stdout
    out = done.stdout
    return out[out.index("- agentsim -") : out.index("full trace:")]


def test_heartbeats_fold_and_what_matters_stays_in_view(tmp_path: Path) -> None:
    section = _section(tmp_path)
    lines = section.splitlines()
    folds = [line for line in lines if "keepAlive heartbeats of Busy/b folded" in line]
    assert folds, section
    assert sum(int(line.split("...")[1].split()[0]) for line in folds) >= 30, section
    assert len([line for line in lines if "alarm:fired" in line]) < 5, section
    # Five calls at the end fill most of the window; the deploy and its eviction (at 10 minutes) and
    # the named record (at 0) are shown before it.
    assert "platform:deploy" in section and "reason=deploy" in section, section
    assert "user:bad" in section, section
    assert "earlier records that matter" in section
