"""The platform's probes, and the counter every probe hit goes to.

The runtime marks its rare paths through the Host port (`agents_core.probes`); the simulated
platform marks its own here, by name, with `Probes.hit`. Neither writes a trace record: a probe
says which paths a run reached, and the hunt reads that from `Simulation.probes` (and a
`ScenarioResult`'s `probes`), never from the trace, so adding a probe changes no digest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agents_core.probes import PROBE_NAME, RUNTIME_PROBES

__all__ = ["ALL_PROBES", "PLATFORM_PROBES", "Probes", "coverage_line", "never_hit"]

PLATFORM_PROBES: dict[str, str] = {
    "platform.alarm_limit_killed": (
        "the 15-minute limit killed a running alarm handler together with its incarnation"
    ),
    "platform.alarm_started_incarnation": (
        "an alarm came due for an agent with no live incarnation and started one: startup ran "
        "inside the alarm delivery (the path agents with no clients recover by)"
    ),
    "platform.alarm_killed_on_retry": (
        "the 15-minute limit killed an alarm handler that was already a retry"
    ),
    "platform.alarm_given_up": "the platform gave an alarm up after its six retries",
    "platform.alarm_due_while_running": "an alarm came due while its handler was still running",
    "platform.alarm_held_due_superseded": (
        "an alarm due held behind a running handler was replaced by a later write of the slot"
    ),
    "platform.crash_rolled_back_writes": (
        "a crash between two statements rolled back a turn that had already written"
    ),
    "platform.crash_after_commit": "the process died at the instant after a turn committed",
    "platform.delivery_waited_at_gate": (
        "an event that does not trigger startup arrived while startup ran, and waited for it"
    ),
}
"""Name -> what reaching it means, for every probe the simulated platform can hit."""

ALL_PROBES: dict[str, str] = {**RUNTIME_PROBES, **PLATFORM_PROBES}
"""Every probe of the runtime and the platform: what `never hit` lists are taken from."""


class Probes:
    """How often each probe was hit in one simulation (user probes included)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def hit(self, name: str) -> None:
        if not isinstance(name, str) or not PROBE_NAME.match(name):
            raise ValueError(
                f"a probe name is dot-separated lower-case words such as "
                f"'fiber.cleanup_delete_failed', got {name!r}"
            )
        self._counts[name] = self._counts.get(name, 0) + 1

    def counts(self) -> dict[str, int]:
        """Probe name -> hits, sorted by name."""
        return dict(sorted(self._counts.items()))

    def __getitem__(self, name: str) -> int:
        return self._counts.get(name, 0)


def never_hit(
    hits: Mapping[str, int] | Iterable[str], known: Iterable[str] = ALL_PROBES
) -> list[str]:
    """The known probes with no hit, sorted."""
    reached = set(hits)
    return sorted(name for name in known if name not in reached)


def coverage_line(runs_reaching: Mapping[str, int], runs: int) -> str:
    """`probes: 7 of 31 reached in 60 runs (name x12, ...); never reached: a, b` for the report
    of a hunt or a sweep; `runs_reaching` counts the runs that reached each probe."""
    reached = ", ".join(f"{name} x{count}" for name, count in sorted(runs_reaching.items()))
    missing = never_hit(runs_reaching)
    known = sum(1 for name in runs_reaching if name in ALL_PROBES)
    text = f"probes: {known} of {len(ALL_PROBES)} reached in {runs} runs"
    text += f" ({reached})" if reached else ""
    return text + (f"; never reached: {', '.join(missing)}" if missing else "")
