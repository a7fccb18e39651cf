"""Probes: rare paths are counted when reached, never written to the trace, and every probe the
code can hit is in a catalogue (and every catalogue entry has a place that hits it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents_core import Agent
from agents_core.probes import RUNTIME_PROBES
from sim import Simulation
from sim.probes import ALL_PROBES, PLATFORM_PROBES, Probes, never_hit

ROOT = Path(__file__).resolve().parents[2]
# `probe(ctx.host, ...)`, `probe(self._ctx.host, ...)` or `probe(host, ...)` in a component.
_RUNTIME_CALL = re.compile(r"""\bprobe\(\s*(?:[a-z_][\w.]*\.)?host,\s*["']([^"']+)["']""")
_PLATFORM_CALL = re.compile(r"""probes\.hit\(\s*["']([^"']+)["']""")


def _calls(package: str, pattern: re.Pattern[str]) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        found.update(pattern.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_runtime_probe_is_catalogued_and_hit_somewhere() -> None:
    """The runtime's probe() calls and RUNTIME_PROBES name the same set."""
    assert _calls("agents_core", _RUNTIME_CALL) == set(RUNTIME_PROBES)


def test_every_platform_probe_is_catalogued_and_hit_somewhere() -> None:
    """The platform's probes.hit() calls and PLATFORM_PROBES name the same set."""
    assert _calls("sim", _PLATFORM_CALL) == set(PLATFORM_PROBES)


def test_catalogue_entries_say_what_reaching_them_means() -> None:
    for name, meaning in ALL_PROBES.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+", name), name
        assert len(meaning) > 20, name


class Marker(Agent):
    async def mark(self, name: str) -> None:
        self.host.trace.probe(name)


def test_a_probe_hit_is_counted_and_leaves_no_trace_record(sim: Simulation) -> None:
    """User code can hit probes of its own; the trace is the same with or without them."""
    ref = sim.agent(Marker, "m")
    sim.call(ref, "mark", "user.rare_path")
    sim.call(ref, "mark", "user.rare_path")
    assert sim.probes == {"user.rare_path": 2}
    assert not [r for r in sim.trace.records if "probe" in r.event]


def test_a_dead_incarnation_hits_no_probe(sim: Simulation) -> None:
    """A probe from an incarnation that already died is refused, as its trace records are."""
    ref = sim.agent(Marker, "m")
    sim.run_for(1)
    host = sim.instance_of(ref).host
    sim.evict(ref)
    host.trace.probe("user.after_death")
    assert sim.probes == {}


def test_a_bad_probe_name_is_refused_with_the_form_it_needs() -> None:
    with pytest.raises(ValueError, match="dot-separated lower-case words.*got 'Bad Name'"):
        Probes().hit("Bad Name")


def test_never_hit_lists_the_known_probes_missing_from_the_hits() -> None:
    known = ["a.x", "b.y", "c.z"]
    assert never_hit({"b.y": 3, "user.q": 1}, known) == ["a.x", "c.z"]


def test_the_platform_probes_the_alarm_limit_on_a_retry() -> None:
    """A handler killed at 15 minutes on its retry reaches `platform.alarm_killed_on_retry`."""

    class Slow(Agent):
        async def arm(self) -> None:
            self.host.alarm.set_alarm(self.host.clock.now_ms() + 1_000)

        async def alarm(self) -> None:
            await self.host.clock.sleep(20 * 60_000)

    with Simulation(seed=1) as sim:
        ref = sim.agent(Slow, "s")
        sim.call(ref, "arm")
        sim.run_for(40 * 60_000)
        assert sim.probes.get("platform.alarm_killed_on_retry", 0) >= 1
