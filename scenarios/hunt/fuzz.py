"""Fuzzing: Hypothesis draws fault schedules over a base scenario and shrinks the first that fails.

A schedule is a seed and a few extra steps: an eviction (any reason), a deploy or a client
reconnect at a sim time, and storage faults aimed at statements the base run really executed
(`scenarios.hunt.fault_sites`: a shape such as `UPDATE cf_agent_tool_runs` on one agent, drawn over
the groups of (agent, kind, table) so user writes are hit as often as housekeeping, then one
occurrence of it, failed with `error`, `crash` just before it, or `crash-after-commit`). Swarm
testing: each example first draws which fault kinds it may use at all, so rare combinations
get room. Probes guide the search: an example that reaches probes seldom seen scores high
(`hypothesis.target`), and Hypothesis mutates towards it. Timed steps are placed between the
base steps by the base run's timeline (before the step
whose wait it falls in, or before a `run_for` / `run_until` it interrupts; after a blocking step
it falls inside) and written into the base file's text (`scenarios.hunt.emit`), which is then loaded
and run: what is run is exactly what a reproducer says. A run fails when the scenario's
expectations or the named invariants (`sim.checkers`, all of them by default) do not hold, or
its liveness phase does not settle. A schedule whose own steps cannot be written as drawn is
set aside. Which failures are findings is `scenarios.hunt.findings.is_finding`, as for
explore: a step's call that fails with the drawn fault itself (`AgentEvicted`, `StorageError`:
the platform telling the caller the truth), an `at:` a fault pushed into the past, a client
the fault disconnected or a drawn step's own failure is not a finding by itself; the run still
counts for what else it shows. With `invariants_only` a step's own checks do not count
either: they are part of the story a fault is allowed to change.

Deterministic: generation uses `random.Random(seed)`, no example database, no deadline. The
reproducer is the shrunk schedule's text with a header saying how it was found, the invariants
it breaks added to its `expect` list (so a plain `agentsim run` checks them), run once more
before it is written: a failure that does not come back is raised as `FlakyFinding`, never
passed over. Hypothesis is imported when a fuzz run starts: it is a test extra, and `agentsim
run` does not need it.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from scenarios.hunt.emit import (
    InsertedStep,
    insert_steps,
    keep_always,
    retitle,
    with_sdk,
)
from scenarios.hunt.fault_draws import (
    FAULT_KINDS,
    MIN_HORIZON_MS,
    SEED_LIMIT,
    UPGRADE,
    Fault,
    Schedule,
    fault_options,
    schedules,
    times,
)
from scenarios.hunt.fault_sites import site_groups, statement_sites
from scenarios.hunt.findings import findings
from scenarios.hunt.reproducers import FlakyFinding, with_broken_invariants, write_reproducer
from scenarios.hunt.tunings import TUNE_NOTE, tunable, tune_text
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import NAME_PATTERN, parse_scenario
from scenarios.language.schema import (
    EVICTION_REASONS,
    CallStep,
    ConnectStep,
    RequestStep,
    Scenario,
    Step,
)
from scenarios.run.failure import INVARIANT, Failure
from scenarios.run.runner import ScenarioResult, invariant_names, run_scenario
from sim.checkers import CHECKERS
from sim.probes import coverage_line
from sim.upgrades import newer_releases

if TYPE_CHECKING:
    from hypothesis import strategies as st

__all__ = [
    "FAULT_KINDS",
    "FUZZ_KINDS",
    "Fault",
    "FlakyFinding",
    "FuzzOutcome",
    "Schedule",
    "fuzz_scenario",
    "place",
]

TIME_PASSING = frozenset({"run_for", "run_until", "run_to_next_alarm", "quiesce"})
"""Steps that only let time pass: a fault drawn inside one is put before it."""
NOTE = "inserted by agentsim fuzz"
TUNE = "tune"
FUZZ_KINDS = (*FAULT_KINDS, UPGRADE, TUNE)
"""What `agentsim fuzz` can draw: the platform's faults, `upgrade` (a deploy bringing a newer
SDK release than the run's, `fault_draws.UPGRADE`), and `tune`, an agent's options set to
values a developer might choose (`scenarios.hunt.tunings`). Upgrades and tuning are asked for,
not drawn by default: with either among the kinds a seed draws other schedules than it did
before; and a tuned run's statements differ from the base run's, so the storage faults aimed
at those miss more often (the bug zoo's fuzz caught one bug fewer with it on)."""


def _hypothesis() -> ModuleType:
    """Hypothesis, imported when a fuzz run starts (it is a test extra, not needed to run)."""
    try:
        import hypothesis
        import hypothesis.errors
        import hypothesis.strategies
    except ModuleNotFoundError:
        raise ValueError(
            "agentsim fuzz needs Hypothesis, which is not installed; install it with "
            "pip install 'agentsim[test]' (or pip install hypothesis)"
        ) from None
    return hypothesis


@dataclass(frozen=True)
class Candidate:
    """A schedule written into the base file: the text, the scenario read from it (None when
    the steps could not be placed) and the line of each inserted step."""

    text: str
    scenario: Scenario | None
    inserted: tuple[InsertedStep, ...]
    inserted_lines: frozenset[int] = frozenset()
    inserted_numbers: frozenset[int] = frozenset()
    """The inserted steps' numbers (`step.index`): a header above the file moves their lines,
    not these."""
    tunings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The options drawn for each agent (alias -> {option: value}), written into its `options:`."""

    def describe(self) -> list[str]:
        """The drawn options and steps, a line each."""
        tuned = [f"tune {alias}: {options}" for alias, options in self.tunings.items()]
        return [*tuned, *(step.describe() for step in self.inserted)]


@dataclass(frozen=True)
class FuzzOutcome:
    """What a fuzz run found: nothing (`finding` None), or the shrunk failing schedule as a
    runnable reproducer (`reproducer`, the `command` that runs it, its `result`)."""

    base: str
    examples: int
    seed: int
    invariants: tuple[str, ...]
    runs: int
    rejected: int
    base_result: ScenarioResult
    probes: dict[str, int] = field(default_factory=dict)
    """How many runs reached each probe (`sim.probes`), over the whole fuzz run."""
    finding: ScenarioResult | None = None
    schedule: Schedule | None = None
    steps: tuple[InsertedStep, ...] = ()
    drawn: tuple[str, ...] = ()
    """The shrunk schedule's options and steps, a line each (`Candidate.describe`)."""
    reproducer: str = ""
    """The reproducer's YAML text (written to `path`)."""
    path: str = ""
    command: str = ""

    @property
    def found(self) -> bool:
        return self.finding is not None or not self.base_result.passed

    def report(self) -> str:
        """For people: what was tried, and for a finding the steps, failures and command."""
        if not self.base_result.passed:
            return "\n".join(
                [
                    f"FAIL {self.base}: the base scenario fails without any drawn fault; fix it "
                    f"(or its expectations) before fuzzing",
                    *(f"  - {failure}" for failure in self.base_result.failures),
                    f"  replay: {self.base_result.replay}",
                ]
            )
        tried = (
            f"{self.runs} runs: up to {self.examples} examples, then shrinking; seed {self.seed}; "
            f"{self.rejected} schedules set aside (their steps could not be placed)"
        )
        if self.finding is None:
            return "\n".join([f"no failure found in {self.base} ({tried})", self.coverage()])
        lines = [
            f"FOUND a failure in {self.base} ({tried}); shrunk to seed {self.finding.seed} and "
            f"{len(self.drawn)} drawn change(s):",
            *(f"  + {line}" for line in self.drawn),
            *(f"  - {failure}" for failure in self.finding.failures),
            self.coverage(),
            f"  reproducer: {self.path}",
            f"  run it: {self.command}",
        ]
        return "\n".join(lines)

    def coverage(self) -> str:
        """Which probes the runs reached (and how many runs each), and which never."""
        return "  " + coverage_line(self.probes, self.runs)


# -- placing drawn steps ------------------------------------------------------------------------
def _ready_ms(step: Step, begin_ms: int) -> int:
    if step.after_ms is not None:
        return begin_ms + step.after_ms
    if step.at_ms is not None:
        return max(begin_ms, step.at_ms)
    return begin_ms


def place(base: Scenario, timeline: ScenarioResult, fault: Fault) -> InsertedStep | None:
    """Where `fault` goes among the base steps, by the base run's timeline; None when it cannot
    go at its time (inside a time-passing step that has its own later-written `at:`)."""
    t = fault.at_ms
    args = dict(fault.args)
    if fault.before is not None:
        return InsertedStep(fault.before, None, fault.action, args, NOTE)
    for index, (step, timing) in enumerate(zip(base.steps, timeline.timings, strict=True)):
        ready = _ready_ms(step, timing.begin_ms)
        if t <= ready:
            return InsertedStep(index, t, fault.action, args, NOTE)
        if t < timing.end_ms:
            if step.kind not in TIME_PASSING:
                return InsertedStep(index + 1, timing.end_ms, fault.action, args, NOTE)
            if step.at_ms is not None and step.at_ms < t:
                return None
            return InsertedStep(index, t, fault.action, args, NOTE)
    return InsertedStep(len(base.steps), t, fault.action, args, NOTE)


def _inserted_indices(base: Scenario, inserted: Sequence[InsertedStep]) -> list[int]:
    """1-based step numbers of the inserted steps in the combined scenario."""
    out, number = [], 0
    ordered = sorted(inserted, key=_order)
    for index in range(len(base.steps) + 1):
        for _ in (s for s in ordered if s.before == index):
            number += 1
            out.append(number)
        number += 1
    return out


# -- the fuzzer ---------------------------------------------------------------------------------
class _Fuzzer:
    def __init__(
        self,
        path: str,
        text: str,
        base: Scenario,
        base_result: ScenarioResult,
        invariants: tuple[str, ...],
        out_path: str,
        invariants_only: bool = False,
        on_run: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.path = path
        self.on_run = on_run
        self.failing = 0
        """Runs that failed so far (after the first, Hypothesis is shrinking it)."""
        self.invariants_only = invariants_only
        self.text = text
        self.base = base
        self.base_result = base_result
        self.invariants = invariants
        self.out_path = out_path
        self.name = _reproducer_name(base.name, out_path)
        self.runs = 0
        self.rejected = 0
        self.groups = site_groups(statement_sites(base, base_result.statements))
        self.probes: dict[str, int] = {}
        """Runs that reached each probe so far (the novelty the search is guided by)."""

    def coverage(self) -> dict[str, int]:
        """Runs that reached each probe, the base run included."""
        out = dict(self.probes)
        for name in self.base_result.probes:
            out[name] = out.get(name, 0) + 1
        return dict(sorted(out.items()))

    def candidate(self, schedule: Schedule) -> Candidate:
        tunings: dict[str, dict[str, Any]] = {}
        for fault in schedule.faults:
            if fault.action == TUNE:
                args = dict(fault.args)
                tunings.setdefault(args["agent"], {})[args["option"]] = args["value"]
        timed = [fault for fault in schedule.faults if fault.action != TUNE]
        placed = [place(self.base, self.base_result, fault) for fault in timed]
        if any(step is None for step in placed):
            return Candidate("", None, ())
        inserted = tuple(sorted((s for s in placed if s is not None), key=_order))
        text, base = self.text, self.base
        if tunings:
            # Options first: the steps are then put in by the lines of the tuned text.
            text = tune_text(text, base, tunings)
            try:
                base = parse_scenario(text, self.out_path)
            except InvalidScenario:
                return Candidate(text, None, inserted, tunings=tunings)
        text = retitle(insert_steps(text, base, inserted), self.name, schedule.seed)
        try:
            scenario = parse_scenario(text, self.out_path)
        except InvalidScenario:
            return Candidate(text, None, inserted, tunings=tunings)
        numbers = set(_inserted_indices(base, inserted))
        lines = frozenset(s.line for s in scenario.steps if s.index in numbers)
        return Candidate(text, scenario, inserted, lines, frozenset(numbers), tunings)

    def evaluate(self, schedule: Schedule) -> tuple[Candidate, ScenarioResult | None]:
        """The candidate and its run; the run is None when the schedule was set aside."""
        candidate = self.candidate(schedule)
        if candidate.scenario is None:
            self.rejected += 1
            return candidate, None
        self.runs += 1
        result = run_scenario(candidate.scenario, invariants=self.invariants)
        return candidate, result

    def findings(self, result: ScenarioResult, candidate: Candidate) -> list[Failure]:
        """The failures of a run that count as findings (`scenarios.hunt.findings`): with
        `invariants_only` a step's own checks of the story do not (what is left of `expect` is
        the file's `always` expectations and, in a reproducer, the invariants it breaks)."""
        return findings(
            result.failures,
            story=not self.invariants_only,
            inserted=candidate.inserted_numbers,
        )

    def fails(self, schedule: Schedule) -> bool:
        candidate, result = self.evaluate(schedule)
        if result is None:
            return False
        # Coverage guidance: a run that reaches probes few runs reached before scores high, and
        # Hypothesis's targeting phase mutates towards such runs.
        novelty = sum(1.0 / (1 + self.probes.get(name, 0)) for name in result.probes)
        for name in result.probes:
            self.probes[name] = self.probes.get(name, 0) + 1
        _hypothesis().target(novelty, label="rarely reached probes")
        failed = bool(self.findings(result, candidate))
        self.failing += failed
        if self.on_run is not None:
            shrinking = f"shrinking, {self.failing} failing runs"
            self.on_run(shrinking if self.failing else f"example {self.runs}", failed)
        return failed

    def strategy(self, kinds: Sequence[str], max_steps: int) -> st.SearchStrategy[Schedule]:
        # The drawing itself is `fault_draws`, shared with the Hypothesis API (`strategies`).
        st = _hypothesis().strategies
        horizon = max([MIN_HORIZON_MS, *(t.end_ms for t in self.base_result.timings)])
        clients = list(
            dict.fromkeys(
                [spec.name for spec in self.base.clients]
                + [s.client for s in self.base.steps if isinstance(s, ConnectStep)]
            )
        )
        options = fault_options(
            st,
            kinds=[kind for kind in kinds if kind != TUNE],
            at=times(st, horizon),
            agents=[spec.alias for spec in self.base.agents],
            clients=clients,
            groups=self.groups,
            reasons=EVICTION_REASONS,
            repeatable=[s for s in self.base.steps if isinstance(s, CallStep | RequestStep)],
            repeat=_repeat,
            upgrades=newer_releases(self.base.sdk),
        )
        tunes = [
            (spec.alias, name, values)
            for spec in self.base.agents
            for name, values in tunable(spec)
        ]
        tuning = TUNE in kinds and bool(tunes)
        if not options and not tuning:
            raise ValueError(
                f"nothing to draw: the fault kinds {list(kinds)} have nothing to act on in "
                f"{self.path} (no statement ran, no client connected)"
            )
        if not tuning:
            return schedules(st, options, max_steps=max_steps, base_seed=self.base.seed)
        tune = st.sampled_from(tunes).flatmap(
            lambda t: st.sampled_from(t[2]).map(
                lambda value: Fault(0, TUNE, (("agent", t[0]), ("option", t[1]), ("value", value)))
            )
        )
        if not options:
            seeds = st.one_of(st.just(self.base.seed), st.integers(0, SEED_LIMIT))
            return st.builds(
                lambda seed, t: Schedule(seed, tuple(t)),
                seeds,
                st.lists(tune, min_size=1, max_size=2),
            )
        # Tunings are drawn beside the platform's faults, not among them, in about one example
        # in four: a tuning changes the run's statements, so a storage fault aimed at the base
        # run's would miss more often if every example were tuned.
        untuned = st.just([])
        tuned = st.one_of(untuned, untuned, untuned, st.lists(tune, min_size=1, max_size=2))
        return st.builds(
            lambda schedule, t: Schedule(schedule.seed, (*t, *schedule.faults)),
            schedules(st, options, max_steps=max_steps, base_seed=self.base.seed),
            tuned,
        )


def _repeat(at_ms: int, step: CallStep | RequestStep) -> Fault:
    """The base `step` sent again at `at_ms`: a call without waiting for it (its result is the
    story's business), a request as the client sends it, without the story's status check."""
    if isinstance(step, CallStep):
        args: list[tuple[str, Any]] = [("agent", step.agent), ("method", step.method)]
        if step.args:
            args.append(("args", list(step.args)))
        if step.kwargs:
            args.append(("kwargs", dict(step.kwargs)))
        args.append(("wait", False))
        return Fault(at_ms, "call", tuple(args))
    args = [("agent", step.agent), ("method", step.method), ("path", step.path)]
    if step.body is not None:
        args.append(("body", step.body))
    if step.headers:
        args.append(("headers", dict(step.headers)))
    return Fault(at_ms, "request", tuple(args))


def _order(step: InsertedStep) -> tuple[int, int]:
    # A step with no `at:` runs when the step before it ends: before any timed one.
    return (step.before, -1 if step.at_ms is None else step.at_ms)


def _reproducer_name(base_name: str, out_path: str) -> str:
    stem = Path(out_path).stem
    return stem if NAME_PATTERN.fullmatch(stem) else f"{base_name[:90]}-fuzz"


def reproducer_path(base: Scenario, out_dir: str | Path, seed: int) -> str:
    return str(Path(out_dir) / f"{base.name[:80]}-fuzz-{seed}.yaml")


def _violated(result: ScenarioResult) -> list[str]:
    """The invariants the run broke (those it checked, not the file's expectations)."""
    names = [f.invariant for f in result.failures if f.kind == INVARIANT]
    return list(dict.fromkeys(names))


def fuzz_scenario(
    path: str | Path,
    *,
    examples: int = 100,
    seed: int = 0,
    invariants: Sequence[str] | None = None,
    kinds: Sequence[str] = FAULT_KINDS,
    max_steps: int = 4,
    out_dir: str | Path = "agentsim-fuzz",
    command: str = "",
    invariants_only: bool = False,
    on_run: Callable[[str, bool], None] | None = None,
    sdk: str | None = None,
    on_releases: Callable[[list[str]], None] | None = None,
) -> FuzzOutcome:
    """Fuzz the scenario file at `path`; on a failure write the reproducer into `out_dir`.

    `invariants`: names checked beyond the file's own expectations (None: every registered
    invariant). `invariants_only`: drop the file's `expect` list (a story scenario pins exact
    times and counts that any drawn fault changes) and check the invariants alone. `command`:
    how the fuzz run was started, for the reproducer's header. `on_run(label, failed)`: after
    each drawn schedule's run (`example 12`, then `shrinking, 3 failing runs`), for progress.
    `sdk`: the release the runs start on, over the file's `sdk:` (the reproducer names it).
    `on_releases(names)`: told, before the first run, every release the runs may run on (for
    the note a preview release gets).
    """
    path = str(path)
    unknown = [kind for kind in kinds if kind not in FUZZ_KINDS]
    if unknown or not kinds:
        raise ValueError(f"unknown fault kind(s) {unknown}; allowed: {list(FUZZ_KINDS)}")
    names = tuple(CHECKERS) if invariants is None else invariant_names(",".join(invariants))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidScenario(path, None, "", f"cannot read the file: {exc}") from None
    if invariants_only:
        text = keep_always(
            text,
            parse_scenario(text, path),
            "expect: left out by agentsim fuzz --invariants-only",
        )
    base = parse_scenario(text, path)
    if sdk is not None and sdk != base.sdk:
        try:
            text = with_sdk(text, sdk)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        base = parse_scenario(text, path)
    if on_releases is not None:
        drawn = newer_releases(base.sdk) if UPGRADE in kinds else ()
        on_releases([base.sdk, *drawn])
    try:  # the edits the fuzzer makes are the same for every schedule: try them once
        probe = [InsertedStep(index, 0, "deploy") for index in (0, len(base.steps))]
        retitle(insert_steps(text, base, probe), base.name, base.seed)
        if TUNE in kinds:
            # Every agent a tuning may name, with the first option and value it may take.
            first = {spec.alias: {n: v[0] for n, v in tunable(spec)[:1]} for spec in base.agents}
            tune_text(text, base, first)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    base_result = run_scenario(base, invariants=names, record_statements=True)
    outcome = FuzzOutcome(path, examples, seed, names, 1, 0, base_result, base_result.probes)
    if not base_result.passed:
        return outcome
    out_path = reproducer_path(base, out_dir, seed)
    fuzzer = _Fuzzer(path, text, base, base_result, names, out_path, invariants_only, on_run)
    hypothesis = _hypothesis()
    HealthCheck, Phase = hypothesis.HealthCheck, hypothesis.Phase  # noqa: N806
    config = hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.target, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    try:
        schedule = hypothesis.find(
            fuzzer.strategy(kinds, max_steps),
            fuzzer.fails,
            settings=config,
            random=random.Random(seed),
        )
    except hypothesis.errors.Flaky as exc:
        raise FlakyFinding(
            f"{path}: a drawn schedule failed once and passed when Hypothesis ran it again; the "
            f"failure depends on something outside the scenario, the seed and the code (state "
            f"kept between runs in the process?): {' '.join(str(exc).split())[:600]}"
        ) from None
    except hypothesis.errors.NoSuchExample:
        return FuzzOutcome(
            path,
            examples,
            seed,
            names,
            fuzzer.runs,
            fuzzer.rejected,
            base_result,
            fuzzer.coverage(),
        )
    return _write_reproducer(
        fuzzer, schedule, seed, examples, command or _command(path, seed, examples)
    )


def _command(path: str, seed: int, examples: int) -> str:
    return f"agentsim fuzz {shlex.quote(path)} --seed {seed} --examples {examples}"


def _write_reproducer(
    fuzzer: _Fuzzer, schedule: Schedule, seed: int, examples: int, how: str
) -> FuzzOutcome:
    candidate, result = fuzzer.evaluate(schedule)
    if candidate.scenario is None or result is None or not fuzzer.findings(result, candidate):
        raise FlakyFinding(
            f"the shrunk schedule {schedule} of {fuzzer.path} did not fail when run again; "
            f"the failure depends on something outside the scenario, the seed and the code"
        )
    out_path = fuzzer.out_path
    text = with_broken_invariants(candidate.text, out_path, _violated(result))

    def header(first_failure: str, run: str) -> list[str]:
        return [
            f"Found by `{how}`:",
            "Hypothesis drew fault steps over the base scenario and shrank the first failing",
            f"schedule to seed {schedule.seed}, the {len(candidate.inserted)} step(s) marked "
            f"'{NOTE}' and the {sum(map(len, candidate.tunings.values()))} option(s) marked "
            f"'{TUNE_NOTE}' below.",
            f"It fails with: {first_failure}",
        ]

    written, check = write_reproducer(
        text,
        out_path,
        header,
        lambda run: fuzzer.findings(run, candidate),
        result.digest,
        found=fuzzer.findings(result, candidate),
        inserted=candidate.inserted_numbers,
    )
    return FuzzOutcome(
        base=fuzzer.path,
        examples=examples,
        seed=seed,
        invariants=fuzzer.invariants,
        runs=fuzzer.runs,
        rejected=fuzzer.rejected,
        base_result=fuzzer.base_result,
        probes=fuzzer.coverage(),
        finding=check,
        schedule=schedule,
        steps=candidate.inserted,
        drawn=tuple(candidate.describe()),
        reproducer=written,
        path=out_path,
        command=f"agentsim run {shlex.quote(out_path)}",
    )
