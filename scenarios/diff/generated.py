"""`agentsim diff --generate N --seed S`: generated workloads played in agentsim and on the real
SDK in workerd, each disagreement shrunk and written as a scenario file.

1. The generator (`scenarios.generate.drawn`) draws N scenarios from the surface the real side
   plays (`scenarios.diff.playable.REAL_SIDE`); each is compiled by `compile_plan`, which runs
   it in agentsim and refuses what the real side cannot play (counted by reason).
2. Every plan is played `repeat` times in one vitest run and judged as `agentsim diff` judges a
   story (`scenarios.diff.command.verdict`): the allow-list of `docs/divergences.md` has spoken
   before anything counts as a difference.
3. Each DIFFER is shrunk in batches (`scenarios.diff.shrink`), at most `shrink_rounds` vitest
   runs, played once more with `repeat` plays, and written to `out_dir` as
   `diff-generate-SEED-N.yaml`, headed with what differed and the command that replays it.
   A shrunk scenario that no longer differs on that last play is reported, not written.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scenarios.diff.command import Verdict, verdict
from scenarios.diff.plan import Compiled, compile_plan
from scenarios.diff.playable import REAL_SIDE
from scenarios.diff.shrink import Reduction, apply_all, reductions, signature
from scenarios.diff.workerd import RealSideUnavailable, play_plans
from scenarios.generate import AREAS, drawn
from scenarios.generate.document import Generated
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import parse_scenario

__all__ = [
    "CANDIDATES_PER_ROUND",
    "SHRINK_ROUNDS",
    "DiffFinding",
    "GeneratedDiff",
    "diff_generated",
    "header",
]

SHRINK_ROUNDS = 3
"""Vitest runs a finding's shrink may take (each plays a whole round of candidates)."""
CANDIDATES_PER_ROUND = 12
"""Candidates played in one round at most (the first ones: the biggest reductions)."""
PLANS_PER_RUN = 6
"""Plans one vitest run plays at most: a run that does not finish within the real side's
timeout (`workerd.PLAY_TIMEOUT_S`) loses these, not the whole draw."""

Player = Callable[[list[dict[str, Any]]], dict[str, Any]]
"""Plans -> plan name -> `workerd.Play` (a test gives one that needs no workerd)."""


@dataclass(frozen=True)
class DiffFinding:
    """One disagreement, shrunk and written (`path` None: it did not differ again)."""

    example: int
    lines: tuple[str, ...]
    path: str | None
    shrink_rounds: int
    steps: tuple[int, int]
    """Steps before and after shrinking."""
    agents: tuple[int, int]


@dataclass
class GeneratedDiff:
    """What a `diff --generate` run drew, played, refused and found."""

    examples: int
    seed: int
    areas: tuple[str, ...]
    drawn: int = 0
    repeats: int = 0
    """Drawn examples the same as an earlier one (not played again)."""
    played: int = 0
    agree: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    unstable: list[str] = field(default_factory=list)
    unplayed: list[str] = field(default_factory=list)
    """Examples whose vitest run did not finish (the reason)."""
    findings: list[DiffFinding] = field(default_factory=list)
    workerd_runs: int = 0

    @property
    def found(self) -> bool:
        return bool(self.findings or self.unstable or self.unplayed)

    def report(self) -> str:
        lines = []
        for number, finding in enumerate(self.findings, start=1):
            before, after = finding.steps
            lines.append(
                f"DIFFER {number}: example {finding.example}, shrunk in {finding.shrink_rounds} "
                f"round(s) from {finding.agents[0]} agent(s) and {before} step(s) to "
                f"{finding.agents[1]} and {after}"
            )
            lines += [f"    {line}" for line in finding.lines]
            if finding.path is None:
                lines.append("    the shrunk scenario did not differ again: not written")
            else:
                lines.append(f"    reproducer: {finding.path}")
                lines.append(f"    replay it: agentsim diff {shlex.quote(finding.path)}")
        lines += [f"UNSTABLE: {note}" for note in self.unstable]
        lines += [f"UNPLAYED: {note}" for note in self.unplayed]
        for reason, count in sorted(self.refused.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"refused {count}: {reason}")
        lines.append(
            f"diff --generate: {self.drawn} drawn over {', '.join(self.areas)} (seed "
            f"{self.seed}, {self.repeats} the same as an earlier one), {self.played} played, "
            f"{sum(self.refused.values())} refused; "
            f"{self.agree} agree, {len(self.findings)} differ, {len(self.unstable)} unstable, "
            f"{len(self.unplayed)} unplayed; "
            f"{self.workerd_runs} workerd run(s)"
        )
        return "\n".join(lines)


def _compiled(generated: Generated, path: str, repeat: int) -> Compiled | str:
    """The plan of a drawn scenario, or why it cannot be played (the reason, no place)."""
    try:
        scenario = parse_scenario(generated.text(), path)
    except InvalidScenario as exc:
        return f"the loader refuses it: {exc}"
    result = compile_plan(scenario, repeat)
    if result.skip is not None:
        return result.skip.why
    return result


def _judge(
    pending: dict[str, Compiled],
    play: Player,
    outcome: GeneratedDiff,
    step: Callable[[str], None] | None = None,
) -> dict[str, Verdict]:
    """Each plan's verdict, the plans played `PLANS_PER_RUN` to a vitest run; the plans of a run
    that did not finish are `UNPLAYED`, with the reason."""
    plans = [c.plan for c in pending.values() if c.plan is not None]
    played: dict[str, Any] = {}
    unplayed: dict[str, str] = {}
    for start in range(0, len(plans), PLANS_PER_RUN):
        chunk = plans[start : start + PLANS_PER_RUN]
        if step is not None:
            step(f"playing plans {start + 1}-{start + len(chunk)} of {len(plans)} in workerd")
        outcome.workerd_runs += 1
        try:
            played.update(play(chunk))
        except RealSideUnavailable as exc:
            unplayed.update((plan["name"], str(exc).splitlines()[0]) for plan in chunk)
    verdicts = {}
    for name, compiled in pending.items():
        entry = played.get(name)
        if name in unplayed:
            verdicts[name] = Verdict(name, "UNPLAYED", unplayed[name])
        elif entry is None:
            verdicts[name] = Verdict(name, "DIFFER", "the real side reported no play")
        else:
            verdicts[name] = verdict(name, compiled, entry.plays, entry.error)
    return verdicts


def header(finding_lines: Sequence[str], how: str, path: str, note: str) -> str:
    """The comment that heads a written finding: how it was found, what differed, the replay."""
    lines = [
        f"Found by `{how}`: {note}",
        "agentsim and the real SDK in workerd disagree here, and no row of docs/divergences.md",
        "allows it. The first differences:",
    ]
    for text in finding_lines:
        lines += [f"  {line.rstrip()}" for line in text.splitlines()]
    lines.append(f"Replay it: agentsim diff {shlex.quote(path)}")
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def _size(generated: Generated) -> tuple[int, int]:
    return len(generated.steps), len(generated.agents)


class _Shrinker:
    def __init__(
        self,
        play: Player,
        outcome: GeneratedDiff,
        rounds: int,
        path: str,
        step: Callable[[str], None],
    ) -> None:
        self.step = step
        self.play = play
        self.outcome = outcome
        self.rounds = rounds
        self.path = path
        self.tried: set[str] = set()

    def candidates(
        self, current: Generated, combined: Generated | None, name: str
    ) -> list[tuple[Reduction | None, Generated, Compiled]]:
        out: list[tuple[Reduction | None, Generated, Compiled]] = []
        options: list[tuple[Reduction | None, Generated | None]] = [(None, combined)]
        options += [(r, r.apply(current)) for r in reductions(current)]
        for reduction, reduced in options:
            if reduced is None or len(out) >= CANDIDATES_PER_ROUND:
                continue
            named = replace(reduced, name=f"{name}-c{len(out) + 1}")
            text = replace(reduced, name=name).text()
            if text in self.tried:
                continue
            self.tried.add(text)
            compiled = _compiled(named, self.path, 1)
            if isinstance(compiled, Compiled):
                out.append((reduction, named, compiled))
        return out

    def shrink(self, generated: Generated, wanted: frozenset[str]) -> tuple[Generated, int]:
        """The smallest scenario found that still differs as `wanted` says, and the rounds."""
        current, combined, rounds = generated, None, 0
        self.tried.add(generated.text())
        while rounds < self.rounds:
            batch = self.candidates(current, combined, generated.name)
            if not batch:
                break
            rounds += 1
            self.step(f"shrink round {rounds} of {self.path}: {len(batch)} candidate(s)")
            plans = {c.plan["name"]: c for _r, _g, c in batch}  # type: ignore[index]
            verdicts = _judge(plans, self.play, self.outcome, self.step)
            kept = [
                (reduction, candidate)
                for reduction, candidate, compiled in batch
                if (v := verdicts[compiled.plan["name"]]).word == "DIFFER"  # type: ignore[index]
                and signature(v.lines) == wanted
            ]
            if not kept:
                break
            first, best = kept[0]
            current = replace(best, name=generated.name)
            others = [r for r, _c in kept[1:] if r is not None and r is not first]
            combined = apply_all(current, others) if others else None
        return current, rounds


def diff_generated(
    *,
    examples: int,
    seed: int,
    areas: Sequence[str] = tuple(AREAS),
    out_dir: str | Path = "agentsim-diff-generate",
    repeat: int = 2,
    shrink_rounds: int = SHRINK_ROUNDS,
    play: Player = play_plans,
    command: str = "",
    on_step: Callable[[str], None] | None = None,
    sdk: str | None = None,
) -> GeneratedDiff:
    """Draw `examples` playable scenarios, play each on both sides, shrink and write every
    disagreement (see the module docstring). `on_step(label)` after each unit of work. `sdk`:
    the release the drawn scenarios run on (their `sdk:` key; None: the default), which `play`
    must play too."""
    step = on_step or (lambda _label: None)
    how = command or f"agentsim diff --generate {examples} --seed {seed}"
    out = Path(out_dir)
    outcome = GeneratedDiff(examples, seed, tuple(a for a in AREAS if a in areas))
    scenarios = drawn(examples=examples, seed=seed, areas=areas, sdk=sdk, surface=REAL_SIDE)
    outcome.drawn = len(scenarios)
    pending: dict[str, Compiled] = {}
    by_name: dict[str, tuple[int, Generated]] = {}
    seen: set[str] = set()
    for number, generated in enumerate(scenarios, start=1):
        if generated.text() in seen:
            outcome.repeats += 1  # Hypothesis draws some examples twice: played once
            continue
        seen.add(generated.text())
        named = replace(generated, name=f"diff-generate-{seed}-example-{number}")
        compiled = _compiled(named, f"<example {number}>", repeat)
        if isinstance(compiled, str):
            outcome.refused[compiled] += 1
        else:
            pending[named.name] = compiled
            by_name[named.name] = (number, named)
        step(f"agentsim run of example {number}")
    outcome.played = len(pending)
    verdicts = _judge(pending, play, outcome, step)
    step("compared")
    for name, found in verdicts.items():
        number, generated = by_name[name]
        if found.word == "AGREE":
            outcome.agree += 1
        elif found.word == "UNSTABLE":
            outcome.unstable.append(f"example {number}: {found.detail}")
        elif found.word == "UNPLAYED":
            outcome.unplayed.append(f"example {number}: {found.detail}")
        else:
            path = str(out / f"diff-generate-{seed}-{len(outcome.findings) + 1}.yaml")
            shrinker = _Shrinker(play, outcome, shrink_rounds, path, step)
            small, rounds = shrinker.shrink(generated, signature(found.lines))
            outcome.findings.append(
                _written(
                    small,
                    generated,
                    (number, found, rounds, shrink_rounds),
                    path,
                    how,
                    repeat,
                    play,
                    outcome,
                )
            )
            step(f"shrank example {number}")
    return outcome


def _written(
    small: Generated,
    generated: Generated,
    how_found: tuple[int, Verdict, int, int],
    path: str,
    how: str,
    repeat: int,
    play: Player,
    outcome: GeneratedDiff,
) -> DiffFinding:
    """Play the shrunk scenario once more (`repeat` plays) and write it when it still differs.
    `how_found` is (example number, its verdict, shrink rounds taken, shrink rounds allowed)."""
    number, found, rounds, bound = how_found
    named = replace(small, name=Path(path).stem)
    lines = found.lines
    compiled = _compiled(named, path, repeat)
    written: str | None = None
    if isinstance(compiled, Compiled):
        again = _judge({named.name: compiled}, play, outcome)[named.name]
        if again.word == "DIFFER" and signature(again.lines) == signature(found.lines):
            lines = again.lines
            note = (
                f"example {number} of the draw, shrunk in {rounds} round(s) of workerd plays "
                f"(at most {bound}, each one vitest run)."
            )
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(header(lines, how, path, note) + named.text(), encoding="utf-8")
            written = path
    return DiffFinding(
        example=number,
        lines=lines,
        path=written,
        shrink_rounds=rounds,
        steps=(len(generated.steps), len(small.steps)),
        agents=(len(generated.agents), len(small.agents)),
    )
