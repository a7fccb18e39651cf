"""Systematic exploration (`agentsim explore`): crash at every kind of point, reorder same-instant
timers, check every invariant, write each distinct failure as a reproducer.

One base run of the scenario (its `expect` list left out unless `with_expect`: a crash changes
a story's exact counts) records every statement agent code ran and counts the same-instant
groups of timers. Then two sweeps, each run checking every registered invariant and the
liveness rule: crash points (`scenarios.hunt.crash_points`: a process death before a statement or
right after a turn's commit, each one `arm_storage_fault` step, chosen in strata within a
budget) and interleavings (`scenarios.hunt.interleavings`: a few groups run out of FIFO order, each
one top-level `interleave:` setting). Every run is the base file's text with that one edit,
loaded and run: what is run is exactly what a reproducer says. Which failures count is
`scenarios.hunt.findings.is_finding`'s call, as for fuzz. Failing runs are grouped by what they
break; the first of each group is written to `out_dir` with a header saying how it was found
and what it broke added to its `expect` list, run once more (a failure that does not come back
is `FlakyFinding`, never passed over), and printed with its `run it:` command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from scenarios.cli.progress import HuntProgress, ProgressPeriod, is_terminal
from scenarios.hunt.crash_points import (
    NOTE,
    CrashPoint,
    all_points,
    choose,
    fault_records,
    landed,
    strata,
)
from scenarios.hunt.emit import (
    InsertedStep,
    insert_steps,
    keep_always,
    remove_top_level,
    retitle,
    with_sdk,
)
from scenarios.hunt.explore_outcome import ExploreOutcome, Finding, breaks
from scenarios.hunt.findings import findings
from scenarios.hunt.interleavings import Planner, with_interleave
from scenarios.hunt.reproducers import FlakyFinding, with_broken_invariants, write_reproducer
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import parse_scenario
from scenarios.language.releases import preview_notes, releases_run
from scenarios.run.failure import Failure
from scenarios.run.runner import ScenarioResult, run_scenario
from sim.checkers import CHECKERS
from sim.interleave import Interleave, Reordering
from sim.trace import format_sim_time

__all__ = [
    "DEFAULT_CRASH_POINTS",
    "DEFAULT_DEPTH",
    "DEFAULT_INTERLEAVINGS",
    "Exploration",
    "ExploreInputError",
    "ExploreOutcome",
    "Finding",
    "breaks",
    "explore_command",
]

DEFAULT_CRASH_POINTS = 300
DEFAULT_INTERLEAVINGS = 50
DEFAULT_DEPTH = 2
OUT_DIR = "agentsim-explore"


class Exploration:
    """One `agentsim explore` of one file: `Exploration(...)` reads it, runs the base and plans
    the runs (`total`); `run()` does them."""

    def __init__(
        self,
        path: str | Path,
        *,
        crash_points: int = DEFAULT_CRASH_POINTS,
        interleavings: int = DEFAULT_INTERLEAVINGS,
        depth: int = DEFAULT_DEPTH,
        with_expect: bool = False,
        out_dir: str | Path = OUT_DIR,
        command: str = "",
        sdk: str | None = None,
    ) -> None:
        self.path = str(path)
        self.with_expect = with_expect
        self.out_dir = Path(out_dir)
        self.command = command or f"agentsim explore {shlex.quote(self.path)}"
        self.invariants = tuple(CHECKERS)
        try:
            text = Path(self.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidScenario(self.path, None, "", f"cannot read the file: {exc}") from None
        if not with_expect:
            text = keep_always(
                text,
                parse_scenario(text, self.path),
                "expect: left out by agentsim explore (--with-expect keeps it)",
            )
        text = remove_top_level(text, "interleave", "interleave: set by agentsim explore")
        self.base = parse_scenario(text, self.path)
        if sdk is not None and sdk != self.base.sdk:  # `--sdk`: every reproducer names it
            try:
                text = with_sdk(text, sdk)
            except ValueError as exc:
                raise ValueError(f"{self.path}: {exc}") from None
            self.base = parse_scenario(text, self.path)
        self.name = self.base.name[:70]
        try:  # the edits explore makes: tried once, so a file they cannot be made in is bad input
            with_interleave(text, Interleave(0, (1,)))
            insert_steps(text, self.base, [InsertedStep(len(self.base.steps), None, "deploy")])
            retitle(text, self.base.name, self.base.seed)
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        self.text = text
        self.base_result = run_scenario(
            self.base,
            invariants=self.invariants,
            record_statements=True,
            interleave=Interleave(0, ()),
        )
        self.outcome = ExploreOutcome(self.path, self.base_result)
        self.points: list[CrashPoint] = []
        sizes = self.base_result.group_sizes
        self.planner = Planner(sizes, interleavings, depth)
        if not self.base_result.passed:
            return
        fired = {
            (t, agent, statement) for t, agent, _, statement in fault_records(self.base_result)
        }
        every = [
            point
            for point in all_points(self.base_result.statements)
            if (point.statement.t_ms, point.statement.agent, _flat(point.statement.statement))
            not in fired  # a statement the scenario's own fault already strikes
        ]
        self.numbers = {point: number for number, point in enumerate(every, start=1)}
        self.points = choose(every, crash_points)
        self.outcome.statements = len(self.base_result.statements)
        self.outcome.points_total = len(every)
        self.outcome.strata = len(strata(every))
        self.outcome.groups = len(sizes)
        self.outcome.probes = dict(self.base_result.probes)

    @property
    def total(self) -> int:
        """How many runs `run()` will make at most (fewer interleavings when the groups run
        out)."""
        if not self.base_result.passed:
            return 0
        return len(self.points) + self.planner.most()

    # -- running ------------------------------------------------------------------------------
    def run(
        self,
        advance: Callable[[str], None] = lambda label: None,
        say: Callable[[str], None] = lambda text: None,
    ) -> ExploreOutcome:
        """Every planned run; `advance(label)` after each, `say(text)` for each new finding."""
        outcome = self.outcome
        if not self.base_result.passed:
            return outcome
        self._say = say
        self._by_breaks: dict[tuple[str, tuple[str, ...]], Finding] = {}
        for point in self.points:
            number = self.numbers[point]
            step = point.step(number)
            text = self._titled(insert_steps(self.text, self.base, [step]), "crash", number)
            try:
                result = self._run(text)
            except InvalidScenario:
                # The loader will not take this agent as a step's target (a sub-agent of a
                # workload that says it has none, a name a file cannot spell): no reproducer
                # could say it, so it is not run.
                outcome.points_unnamed += 1
                advance(f"{self.base.name} crash point {number}")
                continue
            if not landed(point, self.base_result, result):
                outcome.points_set_aside += 1
            else:
                outcome.points_run += 1
                # The one step put in before base step `before` is numbered `before + 1`.
                inserted = (step.before + 1,)
                self._judge("crash", number, point.describe(), text, result, inserted)
            advance(f"{self.base.name} crash point {number}")
        self._digests = {self.base_result.digest}
        singles = self.planner.singles()
        mattered = {
            interleave.points[0]
            for interleave in singles
            if self._interleaving(interleave, advance) != self.base_result.digest
        }
        untried = set(range(1, self.planner.groups + 1)) - {s.points[0] for s in singles}
        left = self.planner.count - len(singles)
        for interleave in self.planner.draws(sorted(mattered | untried), left):
            self._interleaving(interleave, advance)
        outcome.distinct_traces = len(self._digests) - 1
        return outcome

    def _interleaving(self, interleave: Interleave, advance: Callable[[str], None]) -> str:
        """Run one interleaving; its digest."""
        self.outcome.interleavings += 1
        number = self.outcome.interleavings
        text = self._titled(with_interleave(self.text, interleave), "interleave", number)
        result = self._run(text)
        self._digests.add(result.digest)
        what = _reordered(interleave, result.reorderings)
        self._judge("interleave", number, what, text, result)
        advance(f"{self.base.name} interleaving {number}")
        return result.digest

    def _titled(self, text: str, kind: str, number: int) -> str:
        return retitle(text, f"{self.name}-explore-{kind}-{number}", self.base.seed)

    def _out_path(self, kind: str, number: int) -> str:
        return str(self.out_dir / f"{self.name}-explore-{kind}-{number}.yaml")

    def _run(self, text: str) -> ScenarioResult:
        scenario = parse_scenario(text, self.path)
        result = run_scenario(scenario, invariants=self.invariants)
        self.outcome.runs += 1
        for name, hits in result.probes.items():
            self.outcome.probes[name] = self.outcome.probes.get(name, 0) + hits
        return result

    def _judge(
        self,
        kind: str,
        number: int,
        what: str,
        text: str,
        result: ScenarioResult,
        inserted: tuple[int, ...] = (),
    ) -> None:
        broken = breaks(result.failures, self.with_expect, inserted)
        if not broken:
            return
        self.outcome.failures += 1
        key = (kind, tuple(sorted(broken)))
        known = self._by_breaks.get(key)
        if known is not None:
            known.runs += 1
            return
        how = f"crash point {number}" if kind == "crash" else f"interleaving {number}"
        finding = Finding(how, what, broken, result, inserted=inserted)
        finding.path = self._out_path(kind, number)
        finding.result = self._write(finding, text)
        self._by_breaks[key] = finding
        self.outcome.findings.append(finding)
        self._say(finding.report(self.with_expect))

    # -- reproducers --------------------------------------------------------------------------
    def _write(self, finding: Finding, text: str) -> ScenarioResult:
        out_path = finding.path
        violated = [
            b.removeprefix("invariant ") for b in finding.breaks if b.startswith("invariant ")
        ]
        text = with_broken_invariants(text, out_path, violated)

        def header(first_failure: str, run: str) -> list[str]:
            how = (
                "A crash point: the step marked '" + NOTE + "' below arms a fault that "
                "strikes there (its skip counts the earlier statements of that shape the agent "
                "runs from that step on)."
                if finding.how.startswith("crash")
                else "An interleaving: the `interleave:` line makes timers due at one instant "
                "run out of FIFO order at the groups it names (numbered from 1 in the order "
                "the run reaches them)."
            )
            return [
                f"Found by `{self.command}` ({finding.how}):",
                *textwrap.wrap(f"{finding.what}.", 96),
                *textwrap.wrap(how, 96),
                f"It fails with: {first_failure}",
            ]

        def found(run: ScenarioResult) -> list[Failure]:
            return findings(run.failures, story=self.with_expect, inserted=finding.inserted)

        _, check = write_reproducer(
            text,
            out_path,
            header,
            found,
            finding.result.digest,
            found=found(finding.result),
            inserted=finding.inserted,
        )
        return check


def _flat(statement: str) -> str:
    return " ".join(statement.split())[:200]


def _reordered(interleave: Interleave, reorderings: Sequence[Reordering]) -> str:
    """`timers due at one instant ran out of FIFO order (interleave: {seed: 7, points: [3]}):
    at 00:15:30.000 (group 3) A, B ran as B, A`."""
    parts = [
        f"at {format_sim_time(r.t_ms)} (group {r.group}) {', '.join(r.before)} ran as "
        f"{', '.join(r.after)}"
        for r in reorderings
    ]
    done = "; ".join(parts) if parts else "the run never reached those groups"
    return (
        f"timers due at one instant ran out of FIFO order (interleave: "
        f"{interleave.describe()}): {done}"
    )


# -- the command ----------------------------------------------------------------------------------
class ExploreInputError(ValueError):
    """What `agentsim explore` was given cannot be explored (printed as one line, exit 2)."""


def explore_command(
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO | None = None,
    period: ProgressPeriod | None = None,
) -> int:
    """`agentsim explore FILE`: 0 nothing found, 1 found (or a flaky reproducer); bad input
    raises `InvalidScenario` or `ExploreInputError`. Progress (`HuntProgress`): a bar on a
    terminal `out`, else a line on `err` (stderr by default) as `period` says (by default
    `scenarios.cli.progress.DEFAULT_PERIOD`)."""
    if not Path(args.path).is_file():
        raise ExploreInputError(f"no such file: {args.path!r}")
    command = f"agentsim explore {shlex.quote(args.path)}"
    for flag, value, default in (
        ("--crash-points", args.crash_points, DEFAULT_CRASH_POINTS),
        ("--interleavings", args.interleavings, DEFAULT_INTERLEAVINGS),
        ("--depth", args.depth, DEFAULT_DEPTH),
    ):
        if value != default:
            command += f" {flag} {value}"
    if args.with_expect:
        command += " --with-expect"
    sdk = getattr(args, "sdk", None)
    if sdk is not None:
        command += f" --sdk {sdk}"
    try:
        exploration = Exploration(
            args.path,
            crash_points=args.crash_points,
            interleavings=args.interleavings,
            depth=args.depth,
            with_expect=args.with_expect,
            out_dir=args.out,
            command=command,
            sdk=sdk,
        )
    except ValueError as exc:
        if isinstance(exc, InvalidScenario):
            raise
        raise ExploreInputError(str(exc)) from None
    for note in preview_notes(releases_run([exploration.base]), "agentsim explore"):
        print(note, file=sys.stderr if err is None else err)
    shown = HuntProgress(
        out,
        sys.stderr if err is None else err,
        f"explore {exploration.base.name}",
        exploration.total,
        lambda: len(exploration.outcome.findings),
        terminal=is_terminal(out),
        period=period,
    )
    try:
        with shown:
            outcome = exploration.run(shown.advance, shown.print)
    except FlakyFinding as exc:
        print(f"FLAKY: {exc}", file=out)
        return 1
    except OSError as exc:
        raise ExploreInputError(f"cannot write a reproducer: {exc}") from None
    print(outcome.report(all_probes=args.all_probes), file=out, flush=True)
    return 1 if outcome.found else 0
