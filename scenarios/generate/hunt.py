"""The generate hunt: draw scenarios, run each with every invariant, shrink each finding and
write it as a scenario file that fails on its own.

Hypothesis draws (`scenarios.generate.strategy`), with no example database and its random
seeded from the command's seed, so the same seed draws the same scenarios in any process.
Each drawn scenario is written as text, read back by the loader and run. Which of its failures
are findings is the hunt's one rule (`scenarios.hunt.findings.findings`, as fuzz
`--invariants-only` and explore decide it): the platform telling a caller the truth about a
fault (`AgentEvicted`, `StorageError`), a step pushed into the past, a client the fault
disconnected and a drawn fault step's own failure are not. The search is `hypothesis.find`,
round after round: the first example whose findings break something no earlier finding broke
ends a round, and Hypothesis shrinks it while it still breaks that (its first finding's
`subject`: an invariant, the liveness rule, a step), towards fewer agents, calls and faults
and simpler options, for at most `MAX_SHRINK_RUNS` runs. The shrunk scenario is written by
the hunt's reproducer writer (`scenarios.hunt.reproducers.write_reproducer`): run once
more, compared with its finding, headed with how it was found, and `expect_error` /
`may_fail_with` on the calls a drawn fault can refuse. The next round starts with the
examples that are left.

Coverage guides the search: each run's probes and (API call, option) pairs are counted
(`scenarios.generate.coverage`), and a run that reached rare ones scores high in
`hypothesis.target`.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.generate.coverage import Coverage, reached_uses
from scenarios.generate.document import Generated
from scenarios.generate.seeded import seed_only
from scenarios.generate.strategy import AREAS, scenarios
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.findings import findings
from scenarios.hunt.reproducers import FlakyFinding, write_reproducer
from scenarios.language.loader import parse_scenario
from scenarios.run.failure import Failure
from scenarios.run.runner import ScenarioResult, run_scenario
from sim.upgrades import newer_releases

__all__ = ["Finding", "GenerateOutcome", "drawn", "generate", "write_generated"]

MAX_FINDINGS = 20
"""Rounds at most: a run that breaks this many different things has said enough."""
MAX_SHRINK_RUNS = 150
"""Runs a finding may take to shrink; past them its best example so far is written."""


def _hypothesis() -> ModuleType:
    try:
        import hypothesis
        import hypothesis.errors
        import hypothesis.strategies
    except ModuleNotFoundError:
        raise ValueError(
            "agentsim generate needs Hypothesis, which is not installed; install it with "
            "pip install 'agentsim[test]' (or pip install hypothesis)"
        ) from None
    return hypothesis


def _settings(hypothesis: ModuleType, examples: int, phases: Sequence[Any]) -> Any:
    return hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=tuple(phases),
        suppress_health_check=list(hypothesis.HealthCheck),
        report_multiple_bugs=False,
    )


def _strategy(
    areas: Sequence[str],
    invariants: Sequence[str],
    sdk: str | None,
    upgrade: bool,
    surface: Surface = FULL,
) -> Any:
    """The drawn scenarios: on release `sdk` (None: the default), with upgrade deploys drawn
    when `upgrade` asks for them and a newer release exists, of the choices `surface` keeps
    open. A release with older ones before it is also reached by an upgrade: some scenarios
    start on an older release and a drawn deploy brings `sdk` mid-run."""
    start = DEFAULT_RELEASE if sdk is None else sdk
    return scenarios(
        _hypothesis().strategies,
        areas,
        invariants=invariants,
        sdk=None if start == DEFAULT_RELEASE else start,
        upgrades=newer_releases(start) if upgrade else (),
        older=_older(start) if surface.older_starts else (),
        surface=surface,
    )


def _older(release: str) -> tuple[str, ...]:
    """The modelled releases before `release`, oldest first: a run may start on one and
    upgrade to `release`."""
    order = list(RELEASES)
    return tuple(order[: order.index(release)]) if release in order else ()


@dataclass(frozen=True)
class Finding:
    """One shrunk failure, written as a reproducer."""

    subject: str
    path: str
    command: str
    failures: tuple[Failure, ...]
    text: str


@dataclass
class GenerateOutcome:
    """What a generate run did and found."""

    examples: int
    seed: int
    areas: tuple[str, ...]
    runs: int = 0
    drawn: int = 0
    findings: list[Finding] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    coverage: Coverage = field(default_factory=lambda: Coverage(()))

    @property
    def found(self) -> bool:
        return bool(self.findings or self.flaky)

    def report(self) -> str:
        lines = []
        for number, finding in enumerate(self.findings, start=1):
            lines.append(f"FOUND {number}: {finding.subject}")
            lines += [f"  - {failure}" for failure in finding.failures]
            lines.append(f"  reproducer: {finding.path}")
            lines.append(f"  run it: {finding.command}")
        lines += [f"FLAKY: {note}" for note in self.flaky]
        lines += ["  " + line for line in self.coverage.report()]
        lines.append(
            f"{self.drawn} scenarios drawn over {', '.join(self.areas)} (seed {self.seed}), "
            f"{self.runs} runs with shrinking, {len(self.findings)} finding(s)"
        )
        return "\n".join(lines)


class _ShrinkBudgetSpent(BaseException):
    """Raised out of a shrinking round once its runs are spent, so that Hypothesis stops at
    once (a BaseException passes through its handling of a failing example) instead of drawing
    candidate after candidate that is never run; the round's last failing example is its best,
    since every example the shrinker tries is simpler than the one it holds."""


class _Hunt:
    def __init__(
        self,
        out_dir: Path,
        seed: int,
        coverage: Coverage,
        on_run: Callable[[str, bool], None] | None,
    ) -> None:
        self.out_dir = out_dir
        self.seed = seed
        self.path = str(out_dir / f"generate-{seed}.yaml")
        self.coverage = coverage
        self.on_run = on_run
        self.runs = 0
        self.drawn = 0
        self.known: set[str] = set()
        """What earlier findings broke (their first finding's subject)."""
        self.target: str | None = None
        """What this round's finding breaks, once it was found: shrinking keeps it."""
        self.shrink_runs = 0
        self.best: Generated | None = None
        """This round's last failing example (the simplest so far while shrinking)."""

    def run(self, generated: Generated, path: str) -> tuple[ScenarioResult, list[Failure]]:
        result = run_scenario(parse_scenario(generated.text(), path))
        return result, findings(result.failures, story=False, inserted=generated.fault_numbers)

    def fails(self, generated: Generated) -> bool:
        shrinking = self.target is not None
        if shrinking and self.shrink_runs >= MAX_SHRINK_RUNS:
            raise _ShrinkBudgetSpent
        if shrinking:
            self.shrink_runs += 1
        result, found = self.run(generated, self.path)
        self.runs += 1
        if not shrinking:
            self.drawn += 1
        reached = reached_uses(generated.uses, result.trace)
        score = self.coverage.novelty(result.probes, reached)
        self.coverage.add(result.probes, generated.uses, reached)
        _hypothesis().target(score, label="rarely reached probes and API/option pairs")
        subjects = [failure.subject for failure in found]
        if self.target is None:
            new = [subject for subject in subjects if subject not in self.known]
            if new:
                self.target = new[0]
        failed = self.target is not None and self.target in subjects
        if failed:
            self.best = generated
        if self.on_run is not None:
            self.on_run(
                f"shrinking {self.target}" if shrinking else f"example {self.drawn}", failed
            )
        return failed


def generate(
    *,
    examples: int,
    seed: int,
    areas: Sequence[str] = tuple(AREAS),
    invariants: Sequence[str] = ("all",),
    out_dir: str | Path = "agentsim-generate",
    command: str = "",
    on_run: Callable[[str, bool], None] | None = None,
    max_findings: int = MAX_FINDINGS,
    sdk: str | None = None,
    upgrade: bool = False,
) -> GenerateOutcome:
    """Draw up to `examples` scenarios over `areas` and run each; write every finding, shrunk,
    into `out_dir` (see the module docstring). `on_run(label, failed)` after each run. `sdk`:
    the release the scenarios start on (None: the default); `upgrade`: draw deploys that bring
    a newer release too."""
    hypothesis = _hypothesis()
    strategy = _strategy(areas, invariants, sdk, upgrade)
    out = Path(out_dir)
    outcome = GenerateOutcome(examples, seed, tuple(a for a in AREAS if a in areas))
    outcome.coverage = Coverage(outcome.areas)
    hunt = _Hunt(out, seed, outcome.coverage, on_run)
    phases = (hypothesis.Phase.generate, hypothesis.Phase.target, hypothesis.Phase.shrink)
    how = command or f"agentsim generate --examples {examples} --seed {seed}"
    for round_number in range(max_findings):
        left = examples - hunt.drawn
        if left <= 0:
            break
        hunt.target, hunt.shrink_runs, hunt.best = None, 0, None
        try:
            with seed_only():
                shrunk = hypothesis.find(
                    strategy,
                    hunt.fails,
                    settings=_settings(hypothesis, left, phases),
                    random=random.Random(seed * 1_000 + round_number),
                )
        except _ShrinkBudgetSpent:
            assert hunt.best is not None
            shrunk = hunt.best
        except hypothesis.errors.NoSuchExample:
            break
        except hypothesis.errors.Flaky as exc:
            outcome.flaky.append(f"a drawn scenario failed once and passed when run again: {exc}")
            break
        subject = hunt.target or ""
        hunt.known.add(subject)
        number = len(outcome.findings) + len(outcome.flaky) + 1
        try:
            outcome.findings.append(_write(hunt, shrunk, subject, number, how))
        except FlakyFinding as exc:
            outcome.flaky.append(str(exc))
    outcome.runs, outcome.drawn = hunt.runs, hunt.drawn
    return outcome


def _write(hunt: _Hunt, generated: Generated, subject: str, number: int, how: str) -> Finding:
    """The shrunk scenario as the reproducer `generate-SEED-N.yaml`."""
    out_path = str(hunt.out_dir / f"generate-{hunt.seed}-{number}.yaml")
    named = replace(generated, name=Path(out_path).stem)
    result, found = hunt.run(named, out_path)
    if subject not in {failure.subject for failure in found}:
        raise FlakyFinding(
            f"the shrunk scenario broke {subject} while shrinking and not when run again as "
            f"{out_path}"
        )

    def header(first_failure: str, run: str) -> list[str]:
        return [
            f"Found by `{how}`:",
            f"Hypothesis drew this scenario over {', '.join(named.areas)} and shrank it while it "
            f"broke {subject};",
            f"the {len(named.fault_numbers)} step(s) marked '# a platform fault ...' are faults "
            f"drawn beside the workload.",
            f"It fails with: {first_failure}",
        ]

    def again(run: ScenarioResult) -> list[Failure]:
        return findings(run.failures, story=False, inserted=named.fault_numbers)

    text, check = write_reproducer(
        named.text(),
        out_path,
        header,
        again,
        result.digest,
        found=found,
        inserted=named.fault_numbers,
    )
    return Finding(
        subject=subject,
        path=out_path,
        command=f"agentsim run {shlex.quote(out_path)}",
        failures=tuple(again(check)),
        text=text,
    )


def drawn(
    *,
    examples: int,
    seed: int,
    areas: Sequence[str] = tuple(AREAS),
    invariants: Sequence[str] = ("all",),
    sdk: str | None = None,
    upgrade: bool = False,
    surface: Surface = FULL,
) -> list[Generated]:
    """The first `examples` scenarios the seed draws over `areas` (of the choices `surface`
    keeps open), unrun, as `generate` draws them. Same seed, same scenarios."""
    hypothesis = _hypothesis()
    found: list[Generated] = []

    def keep(generated: Generated) -> bool:
        found.append(generated)
        return False

    try:
        with seed_only():
            hypothesis.find(
                _strategy(areas, invariants, sdk, upgrade, surface),
                keep,
                settings=_settings(hypothesis, examples, (hypothesis.Phase.generate,)),
                random=random.Random(seed),
            )
    except hypothesis.errors.NoSuchExample:
        pass
    return found


def write_generated(
    *,
    examples: int,
    seed: int,
    out_dir: str | Path,
    areas: Sequence[str] = tuple(AREAS),
    invariants: Sequence[str] = ("all",),
    sdk: str | None = None,
    upgrade: bool = False,
) -> list[Path]:
    """Draw `examples` scenarios as `generate` would and write them into `out_dir`, unrun:
    `generated-SEED-N.yaml`, N from 1. Same seed, same files."""
    out = Path(out_dir)
    written: list[Path] = []
    scenarios_drawn = drawn(
        examples=examples, seed=seed, areas=areas, invariants=invariants, sdk=sdk, upgrade=upgrade
    )
    for number, generated in enumerate(scenarios_drawn, start=1):
        path = out / f"generated-{seed}-{number}.yaml"
        text = replace(generated, name=path.stem).text()
        parse_scenario(text, str(path))  # a drawn document the loader refuses is a bug: loud
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
