"""`agentsim diff PATH...`: each scenario in agentsim and on the real SDK in workerd, compared.

One line per scenario: `AGREE`, `DIFFER` (with the first differences, both sides' records),
`UNSTABLE` (the real side's own plays disagree, so no verdict is drawn) or `SKIP` (which step
the real side cannot play, and why). Every plan is played `--repeat` times in one vitest run.
Exit codes: 0 nothing differs, 1 something differs or is unstable, 2 bad input (including a
scenario file named on the command line that the real side cannot play at all, and a machine
where the real side cannot run).

The release: a scenario plays the npm version of `agents` that `--sdk` names, else its file's
`sdk:` key, else the default release, 0.32.0 (`differential/package.json` pins 0.21.0; another
version is installed beside it once, under `differential/.sdk/`); the agentsim side runs the
same release when agentsim models it. A story that upgrades in the middle (`deploy: {sdk:
...}`) is refused: the real side plays one worker bundle per play (`plan.UPGRADE_WHY`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from agents_core.releases.registry import RELEASES
from scenarios.cli.inputs import path_problem
from scenarios.diff.compare import Outcome, compare, first_difference, without_allowed
from scenarios.diff.normalise import Story, normalise
from scenarios.diff.plan import Compiled, compile_plan
from scenarios.diff.workerd import RealSideUnavailable, play_plans, project_for
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import load_scenario
from scenarios.language.schema import Scenario

__all__ = ["Verdict", "diff_command", "diff_scenarios", "verdict"]

EXIT_OK, EXIT_DIFFER, EXIT_BAD_INPUT = 0, 1, 2


class DiffInputError(ValueError):
    """A path `diff` cannot read scenarios from (the sentence names it and why)."""


@dataclass
class Verdict:
    """One scenario's line: its word (AGREE, DIFFER, UNSTABLE, SKIP) and what follows."""

    name: str
    word: str
    detail: str
    lines: tuple[str, ...] = ()

    def text(self) -> str:
        head = f"{self.word:<8} {self.name}" + (f"  {self.detail}" if self.detail else "")
        return "\n".join([head, *(f"    {line}" for line in self.lines)])


def _files(paths: list[str]) -> list[tuple[Path, bool]]:
    """(scenario file, named on the command line) for every path; directories expand."""
    out: list[tuple[Path, bool]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(path.rglob("*.yaml")) + sorted(path.rglob("*.yml"))
            if not found:
                raise DiffInputError(f"no *.yaml or *.yml scenario files in {given!r}")
            out += [(p, False) for p in found]
        elif path.is_file():
            out.append((path, True))
        else:
            raise DiffInputError(f"{given!r}: {path_problem(given) or 'not a scenario file'}")
    return out


def _stable(plays: list[Story]) -> list[str]:
    for index, other in enumerate(plays[1:], start=2):
        found = first_difference(plays[0], other, names=("play 1", f"play {index}"), limit=2)
        if found:
            return found
    return []


def verdict(name: str, compiled: Compiled, plays: list[dict], error: str | None) -> Verdict:
    """A played plan's line: its real side's plays against its agentsim run (`compiled`)."""
    python = compiled.python
    assert python is not None
    if error is not None or not plays:
        return Verdict(name, "DIFFER", "the real side did not finish its play", (error or "",))
    stories = [normalise(p["records"], p["tables"], real=True) for p in plays]
    unstable = _stable([without_allowed(story, name) for story in stories])
    if unstable:
        return Verdict(
            name, "UNSTABLE", f"the real side's {len(plays)} plays disagree", tuple(unstable)
        )
    ours = normalise(python.records, python.tables, real=False)
    outcome: Outcome = compare(ours, stories[0], name)
    errors = [e for e in plays[0].get("errors", []) if e]
    if outcome.agree:
        rows = sum(len(r) for t in stories[0].tables.values() for r in t.values())
        detail = f"({len(ours.records)} records, {rows} rows, {len(plays)} plays)"
        if outcome.allowed:
            detail += f"  allowed: {', '.join(outcome.allowed)}"
        return Verdict(name, "AGREE", detail)
    lines = list(outcome.differences)
    if errors:
        lines.append("the real side's calls raised: " + "; ".join(errors[:3]))
    return Verdict(name, "DIFFER", "first differences:", tuple(lines))


def diff_scenarios(
    paths: list[str], repeat: int = 3, sdk: str | None = None
) -> tuple[list[Verdict], bool]:
    """The verdicts for every scenario under `paths`, and whether a scenario named directly
    was refused (a SKIP of a file the caller asked for by name)."""
    files = _files(paths)
    scenarios = [(_on_release(load_scenario(str(path)), sdk), named) for path, named in files]
    compiled = [(s, named, compile_plan(s, repeat)) for s, named in scenarios]
    # Each scenario plays the npm version it names: --sdk, else its file's sdk: key, else the
    # default release (the pinned project when that is its version); the plans of one version
    # are played together.
    by_version: dict[str, list[dict]] = {}
    keys: dict[int, str] = {}
    for index, (scenario, _named, result) in enumerate(compiled):
        if result.plan is not None:
            # The real side names its Durable Objects and its results after the plan: two files
            # of one `name:` must not share either, so the later ones play under a numbered name.
            key = scenario.name
            if key in keys.values():
                key = f"{scenario.name}--{index + 1}"
                result.plan["name"] = key
            keys[index] = key
            by_version.setdefault(_version(scenario, sdk), []).append(result.plan)
    played = {}
    for version, plans in by_version.items():
        played.update(play_plans(plans, project_for(version)))
    verdicts = []
    refused = False
    for index, (scenario, named, result) in enumerate(compiled):
        if result.skip is not None:
            verdicts.append(Verdict(scenario.name, "SKIP", result.skip.sentence()))
            refused = refused or named
            continue
        play = played.get(keys[index])
        if play is None:
            verdicts.append(Verdict(scenario.name, "DIFFER", "the real side reported no play"))
            continue
        verdicts.append(verdict(scenario.name, result, play.plays, play.error))
    return verdicts, refused


def _on_release(scenario: Scenario, sdk: str | None) -> Scenario:
    """The agentsim side of a diff on `--sdk`: that release, when agentsim models it (another
    npm version is played on the real side only, against the file's own release here)."""
    return scenario.on_release(sdk) if sdk in RELEASES else scenario


def _version(scenario: Scenario, sdk: str | None) -> str:
    """The npm version of `agents` the real side plays `scenario` on: `--sdk`, else the release
    the agentsim side runs (the file's `sdk:` key, else the default release)."""
    return sdk if sdk is not None else scenario.sdk


def diff_command(paths: list[str], repeat: int, sdk: str | None, out: TextIO, err: TextIO) -> int:
    """The `diff` subcommand; returns the exit code."""
    try:
        verdicts, refused = diff_scenarios(paths, repeat, sdk)
    except (InvalidScenario, DiffInputError) as exc:
        print(f"agentsim diff: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    except RealSideUnavailable as exc:
        print(f"agentsim diff: cannot run the real side: {exc}", file=err)
        return EXIT_BAD_INPUT
    for verdict in verdicts:
        print(verdict.text(), file=out)
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.word] = counts.get(verdict.word, 0) + 1
    summary = ", ".join(
        f"{counts[w]} {w.lower()}" for w in ("AGREE", "DIFFER", "UNSTABLE", "SKIP") if w in counts
    )
    print(f"diff: {summary}" + (f" (sdk {sdk})" if sdk else ""), file=out)
    if counts.get("DIFFER") or counts.get("UNSTABLE"):
        return EXIT_DIFFER
    return EXIT_BAD_INPUT if refused else EXIT_OK
