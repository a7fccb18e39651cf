"""What `agentsim explore` found and covered: one `Finding` per kind of failure, and the
`ExploreOutcome` report that ends with `N crash points, M interleavings, K failures`.

Which failures of an explored run count is `scenarios.hunt.findings.is_finding`, the rule fuzz
follows too: an invariant breaks, the liveness phase does not settle, or a step raises an error
the fault does not explain. A call that failed because its incarnation died, a client that is
no longer connected, a later `at:` pushed into the past: that is the platform telling the truth
about the fault, not a finding. Without `--with-expect` a step's own check of the story does not
count either (a status code, a reply, a call that waits for something the crash prevented and
never finishes): a crash changes the story, and the invariants are what judge the runtime.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from scenarios.hunt.findings import findings
from scenarios.run.failure import Failure
from scenarios.run.runner import ScenarioResult
from sim.probes import ALL_PROBES, never_hit

__all__ = ["ExploreOutcome", "Finding", "breaks"]

SHOWN = 5
"""Failure sentences printed per finding (the reproducer's run shows them all)."""


def breaks(
    failures: Sequence[Failure], with_expect: bool, inserted: Collection[int] = ()
) -> tuple[str, ...]:
    """What the findings among `failures` are about (their `subject`: `invariant NAME`,
    `liveness`, `step N (kind)`, `expect N (kind)`), each once, in order; `inserted`: the step
    explore inserted, whose own failures never count."""
    found = findings(failures, story=with_expect, inserted=inserted)
    return tuple(dict.fromkeys(failure.subject for failure in found))


@dataclass
class Finding:
    """The first run of one kind of failure (`breaks`), written as a reproducer, and how many
    runs failed that way."""

    how: str
    """`crash point 12` or `interleaving 3`."""
    what: str
    """What the run did differently, for people."""
    breaks: tuple[str, ...]
    result: ScenarioResult
    path: str = ""
    runs: int = 1
    inserted: tuple[int, ...] = ()
    """The number of the step explore inserted (a crash point's; none for an interleaving)."""

    def report(self, with_expect: bool = False) -> str:
        """What the run did and broke (the first few sentences), the reproducer and, last, the
        command that runs it."""
        own = findings(self.result.failures, story=with_expect, inserted=self.inserted)
        lines = [f"FOUND ({self.how}): {self.what}"]
        lines += [f"  - {failure}" for failure in own[:SHOWN]]
        if len(own) > SHOWN:
            lines.append(f"  ... and {len(own) - SHOWN} more")
        explained = len(self.result.failures) - len(own)
        if explained:
            lines.append(
                f"  ({explained} more failure(s) the fault itself explains, such as a call "
                f"whose incarnation died; the reproducer shows them)"
            )
        lines += [f"  reproducer: {self.path}", f"  run it: agentsim run {shlex.quote(self.path)}"]
        return "\n".join(lines)


@dataclass
class ExploreOutcome:
    """What an exploration covered and found."""

    base: str
    base_result: ScenarioResult
    statements: int = 0
    points_total: int = 0
    strata: int = 0
    points_run: int = 0
    points_set_aside: int = 0
    points_unnamed: int = 0
    groups: int = 0
    interleavings: int = 0
    distinct_traces: int = 0
    failures: int = 0
    findings: list[Finding] = field(default_factory=list)
    probes: dict[str, int] = field(default_factory=dict)
    runs: int = 1

    @property
    def found(self) -> bool:
        return self.failures > 0 or not self.base_result.passed

    def report(self, all_probes: bool = False) -> str:
        """What was covered, ending with `N crash points, M interleavings, K failures`;
        `all_probes`: name every catalogue probe never hit (by default, a count per area)."""
        if not self.base_result.passed:
            return "\n".join(
                [
                    f"FAIL {self.base}: the base run fails before anything is explored; fix it "
                    f"(or its expectations) first",
                    *(f"  - {failure}" for failure in self.base_result.failures),
                    f"  replay: {self.base_result.replay}",
                    "0 crash points, 0 interleavings, 1 failures",
                ]
            )
        missing = never_hit(self.probes, ALL_PROBES)
        reached = [name for name in ALL_PROBES if name in self.probes]
        own = [name for name in self.probes if name not in ALL_PROBES]
        lines = [
            f"explored {self.base}: base run passes ({self.statements} statements, "
            f"{self.groups} same-instant groups of timers)",
            f"crash points: {self.points_run} run of {self.points_total} "
            f"({self.strata} strata of agent, kind and statement shape)"
            + (
                f"; {self.points_set_aside} set aside (the fault fired elsewhere)"
                if self.points_set_aside
                else ""
            )
            + (
                f"; {self.points_unnamed} not run (no step can name their agent)"
                if self.points_unnamed
                else ""
            ),
            f"interleavings: {self.interleavings} run ({self.distinct_traces} distinct traces)"
            if self.groups
            else "interleavings: none (no two timers are ever due at the same instant)",
            _wrapped(
                f"probes: {len(reached)} of {len(ALL_PROBES)} hit across {self.runs} runs"
                + (f" (and {len(own)} of the agents' own)" if own else "")
                + (f": {', '.join(sorted(reached))}" if reached else "")
            ),
            _wrapped(
                f"never hit: {', '.join(missing) if all_probes else _by_area(missing)}"
                if missing
                else "never hit: none"
            ),
            *(
                f"{f.runs} run(s) break {', '.join(f.breaks)} ({f.how} first): {f.path}"
                for f in self.findings
            ),
            f"{self.points_run} crash points, {self.interleavings} interleavings, "
            f"{self.failures} failures",
        ]
        return "\n".join(lines)


def _wrapped(line: str) -> str:
    return textwrap.fill(line, 100, subsequent_indent="  ", break_on_hyphens=False)


def _by_area(names: list[str]) -> str:
    """`48 (agent_tool 21, chat 7, ...; --all-probes names them)`."""
    areas: dict[str, int] = {}
    for name in names:
        area = name.split(".", 1)[0]
        areas[area] = areas.get(area, 0) + 1
    counts = ", ".join(f"{area} {count}" for area, count in sorted(areas.items()))
    return f"{len(names)} ({counts}; --all-probes names them)"
