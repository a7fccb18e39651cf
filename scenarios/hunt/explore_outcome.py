"""What `agentsim explore` found and covered: which failures count, one `Finding` per kind of
failure, and the `ExploreOutcome` report that ends with `N crash points, M interleavings, K
failures`.

A failure sentence of an explored run counts (`classify`) when an invariant breaks, the liveness
phase does not settle, or a step raises an exception the fault does not explain. A call that
failed because its incarnation died, a client that is no longer connected, a later `at:` pushed
into the past: that is the platform telling the truth about the fault, not a finding. Without
`--with-expect` a step's own check of the story does not count either (a status code, a reply,
a call that waits for something the crash prevented and never finishes): a crash changes the
story, and the invariants are what judge the runtime.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass, field

from scenarios.hunt.reproducers import PLATFORM_ERRORS
from scenarios.run.runner import ScenarioResult
from sim.probes import ALL_PROBES, never_hit

__all__ = ["ExploreOutcome", "Finding", "classify"]

SHOWN = 5
"""Failure sentences printed per finding (the reproducer's run shows them all)."""
_PLATFORM_TRUTH = re.compile(
    rf"(failed with|raised) ({'|'.join(PLATFORM_ERRORS)})\b|had already passed|"
    r"was never connected|is not connected"
)
_STEP_ERROR = re.compile(r"\braised \w")


def classify(failure: str, path: str, with_expect: bool) -> str | None:
    """What a failure sentence of an explored run counts as (`invariant NAME`, `liveness`,
    `step N (kind)`, `expect N (kind)`), or None when it is not a finding: a step that failed
    because the fault killed what it called, or (without `with_expect`) a step whose own check
    of the story (a status, a reply) no longer holds."""
    rest = failure.removeprefix(f"{path}:")
    rest = re.sub(r"^\d+: ", "", rest).lstrip()
    if rest.startswith("invariant "):
        return "invariant " + rest.split()[1].rstrip(":")
    if rest.startswith(("liveness:", "the liveness phase")):
        return "liveness"
    label = re.match(r"(step|expect) \d+ \([^)]*\)", rest)
    what = label.group(0) if label else rest[:60]
    if _PLATFORM_TRUTH.search(rest):
        return None
    if rest.startswith("expect ") or with_expect:
        return what
    return what if _STEP_ERROR.search(rest) else None


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

    def report(self, with_expect: bool = False) -> str:
        """What the run did and broke (the first few sentences), the reproducer and, last, the
        command that runs it."""
        own = [f for f in self.result.failures if classify(f, self.path, with_expect) is not None]
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
