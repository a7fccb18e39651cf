"""The hunt against one tree: scratch copies, the tools, and one tool's hunt over a bug's stories.

A scratch tree holds copies of `agents_core`, `sim`, `scenarios` and `reports` (what a hunt
imports) and of `hunt.py`; a bug is planted in its own copy, never in the working tree. A tool
(`fuzz`, and `explore` when the tree has it) runs alone, in a subprocess, once per story, with a
fixed size per story (examples, crash points), until the first story where it exits 1 with a
finding that is the bug's, or its time budget runs out. A finding is the bug's when a reproducer
it wrote passes on the clean tree with every invariant checked: the tree under test has real
bugs of its own, and a finding it shares says nothing about the zoo's. `fuzz` checks the
invariants only (`--invariants-only`): story scenarios pin exact counts and times that any
drawn fault changes. The tool's wall time to the finding is recorded; the sizes, not the clock,
decide what is found, so a result is the same on every run (unless the budget cuts a hunt
short, which the result says).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scenarios.hunt.findings import findings
from scenarios.run.failures import read_run_record

__all__ = [
    "Budget",
    "HuntResult",
    "StoryOutcome",
    "Tool",
    "agentsim_has",
    "clean_tree_passes",
    "copy_tree",
    "detect_tools",
    "environment",
    "hunt",
    "run_segment",
]

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents_core", "sim", "scenarios", "reports")
HUNT_SCRIPT = "_bugzoo_hunt.py"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "agentsim-fuzz", "agentsim-failures")
_FINDING = re.compile(r"^(FOUND|FAIL|FLAKY)\b", re.M)
_FAILURE_LINE = re.compile(r"^\s+- (.+)$", re.M)
_REPRODUCER = re.compile(r"^\s*reproducer: (\S+)\s*$", re.M)
_WHERE = re.compile(r"^\S+\.yaml(:\d+)?: ")


@dataclass(frozen=True)
class Budget:
    """One size flag of a tool: `total` units per bug, split evenly over the bug's stories, at
    least `minimum` and at most `maximum` per story (a bug with one slow story must not spend
    its whole budget there)."""

    flag: str
    total: int
    minimum: int
    maximum: int

    def share(self, stories: int) -> int:
        return min(self.maximum, max(self.minimum, self.total // max(stories, 1)))


@dataclass(frozen=True)
class Tool:
    """A hunting command of `agentsim`, and how big a hunt of it is per story."""

    name: str
    budgets: tuple[Budget, ...]
    extra: tuple[str, ...] = ()
    sdk: str | None = None
    """The SDK release every run starts on (`--sdk`, over a story's `sdk:` key), and the one
    the clean tree replays a finding on; None: the story's own."""

    def on_release(self, sdk: str | None) -> Tool:
        """This tool with its runs on `sdk` (itself when None)."""
        return self if sdk is None else replace(self, sdk=sdk)

    def shares(self, stories: int) -> tuple[int, ...]:
        """The size of the hunt over each story, for a bug with `stories` stories."""
        return tuple(budget.share(stories) for budget in self.budgets)

    def argv(self, story: Path, shares: tuple[int, ...], out: Path) -> list[str]:
        args = [self.name, str(story), *self.extra, "--out", str(out)]
        for budget, share in zip(self.budgets, shares, strict=True):
            args += [budget.flag, str(share)]
        if self.sdk is not None:
            args += ["--sdk", self.sdk]
        return args

    def base_shares(self) -> tuple[int, ...]:
        """The smallest hunt of a story: its base run (and, for fuzz, one example), which is
        how each tool starts anyway."""
        return tuple(1 if budget.flag == "--examples" else 0 for budget in self.budgets)

    def describe(self) -> str:
        sizes = ", ".join(f"{b.total} {b.flag.lstrip('-')}" for b in self.budgets)
        on = "" if self.sdk is None else f" on SDK {self.sdk}"
        return f"{self.name} ({sizes} per bug{on})"


@dataclass(frozen=True)
class StoryOutcome:
    """One tool run over one story."""

    story: str
    found: bool
    seconds: float
    first_failure: str = ""
    base: bool = False
    """The story failed without any drawn fault (the base run)."""
    reproducers: tuple[str, ...] = ()
    """The scenario files the tool wrote for the finding."""
    crashed: str = ""
    """The tool itself failed (a traceback, a bad-input exit): its last line."""
    timed_out: bool = False
    probes: dict[str, int] = field(default_factory=dict)


@dataclass
class HuntResult:
    """One tool's hunt for one bug over its stories."""

    tool: str
    stories: int
    shares: tuple[int, ...]
    found_in: StoryOutcome | None = None
    seconds: float = 0.0
    """The tool's wall time from the hunt's start to the finding (or to its end)."""
    ran: int = 0
    timed_out: bool = False
    crashes: list[StoryOutcome] = field(default_factory=list)
    probes: dict[str, int] = field(default_factory=dict)
    shared: list[StoryOutcome] = field(default_factory=list)
    """Findings the clean tree shares (their reproducers fail there too): not the bug's."""
    base_failed: list[str] = field(default_factory=list)
    """With `beyond_base`: the stories whose base run already shows the bug."""
    beyond: StoryOutcome | None = None
    """With `beyond_base`: the first finding of the full hunts in a story whose base run
    passes (what the drawn faults and enumerated points found on their own)."""
    base_findings: list[StoryOutcome] = field(default_factory=list)
    """With `beyond_base`: the base pass's findings that are the bug's, one per story (`base`
    says whether the story failed without any drawn fault)."""

    @property
    def caught(self) -> bool:
        return self.found_in is not None


def export_revision(destination: Path, revision: str, source: Path = ROOT) -> Path:
    """A scratch tree at `destination` holding the packages as committed at `revision` (not as
    the working tree has them, which may be mid-edit), and the hunt script."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", revision, *PACKAGES],
            capture_output=True,
            check=True,
        )
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip()
        raise SystemExit(f"bugzoo: cannot export revision {revision!r}: {message}") from exc
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    shutil.copy(Path(__file__).with_name("hunt.py"), destination / HUNT_SCRIPT)
    return destination


def copy_tree(destination: Path, source: Path = ROOT) -> Path:
    """A scratch tree at `destination`: the packages a hunt imports, and the hunt script."""
    destination.mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        shutil.copytree(source / package, destination / package, ignore=_IGNORE)
    # From a scratch source, its own copy: what a run started with, whatever changes since.
    script = source / HUNT_SCRIPT
    if not script.is_file():
        script = Path(__file__).with_name("hunt.py")
    shutil.copy(script, destination / HUNT_SCRIPT)
    return destination


def environment(tree: Path) -> dict[str, str]:
    """The environment a tool runs in: the scratch `tree` first on the path, fixed hashing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COLUMNS"))}
    env.update(PYTHONPATH=str(tree), PYTHONHASHSEED="0", COLUMNS="200", NO_COLOR="1")
    return env


def _agentsim(tree: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scenarios.cli", *args],
        cwd=tree,
        env=environment(tree),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def agentsim_has(tree: Path, command: str) -> bool:
    """Whether `agentsim <command> --help` runs in `tree`."""
    try:
        done = _agentsim(tree, [command, "--help"], 60)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def detect_tools(
    tree: Path, fuzz_examples: int, crash_points: int, interleavings: int
) -> tuple[list[Tool], list[str]]:
    """The hunting tools this tree has (sized per bug), and a note for each one it lacks.
    `fuzz` checks the invariants only, with a fixed seed; `explore` leaves expectations out
    by default (a crash changes a story), and is deterministic by construction."""
    fuzz = Tool(
        "fuzz", (Budget("--examples", fuzz_examples, 10, 80),), ("--invariants-only", "--seed", "0")
    )
    tools, notes = [fuzz], []
    try:
        explore = _agentsim(tree, ["explore", "--help"], 60)
    except subprocess.TimeoutExpired:
        explore = None
    if explore is None or explore.returncode != 0:
        notes.append("explore: not available (agentsim explore --help failed in this tree)")
        return tools, notes
    text = explore.stdout
    budgets = [
        Budget(flag, total, minimum, maximum)
        for flag, total, minimum, maximum in (
            ("--crash-points", crash_points, 20, 160),
            ("--interleavings", interleavings, 5, 40),
        )
        if flag in text
    ]
    extra = ("--invariants-only",) if "--invariants-only" in text else ()
    tools.append(Tool("explore", tuple(budgets), extra))
    return tools, notes


def _first_failure(output: str) -> str:
    """The first failure the tool listed under its finding (the tool decided, by `is_finding`,
    which failures those are), else its first line."""
    failures = _FAILURE_LINE.findall(output) or output.strip().splitlines()[:1] or [""]
    return _WHERE.sub("", " ".join(failures[0].split()))


def _outcome(tree: Path, line: dict[str, Any]) -> StoryOutcome:
    """What one story's run says, from its report line."""
    _check_imported_from(tree, line)
    story = Path(line["argv"][1]).stem
    output, code, seconds = line["output"], line["code"], line["seconds"]
    probes = line.get("probes", {})
    finding = _FINDING.search(output)
    if code == 1 and finding is not None:
        return StoryOutcome(
            story,
            True,
            seconds,
            _first_failure(output),
            base=finding.group(1) == "FAIL",
            reproducers=tuple(dict.fromkeys(_REPRODUCER.findall(output))),
            probes=probes,
        )
    if code != 0:
        last = next(iter(reversed(output.strip().splitlines())), f"exit {code}")
        return StoryOutcome(story, False, seconds, crashed=last.strip(), probes=probes)
    return StoryOutcome(story, False, seconds, probes=probes)


def run_segment(
    tree: Path, tool: Tool, stories: list[Path], shares: tuple[int, ...], timeout: float
) -> tuple[list[StoryOutcome], float, bool]:
    """Run `tool` over `stories` in one subprocess until the first one that exits 1: the
    outcome of each story it ran, the segment's wall time, and whether the budget cut it."""
    out = tree / "agentsim-out" / tool.name
    segment = tree / "segments" / f"{tool.name}-{stories[0].stem}"
    segment.parent.mkdir(parents=True, exist_ok=True)
    report = segment.with_suffix(".jsonl")
    report.unlink(missing_ok=True)
    spec = {"report": str(report), "runs": [tool.argv(story, shares, out) for story in stories]}
    spec_path = segment.with_suffix(".json")
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    started = time.monotonic()
    timed_out = False
    try:
        done = subprocess.run(
            [sys.executable, str(tree / HUNT_SCRIPT), str(spec_path)],
            cwd=tree,
            env=environment(tree),
            capture_output=True,
            text=True,
            timeout=max(timeout, 0.1),
            check=False,
        )
    except subprocess.TimeoutExpired:
        timed_out, done = True, None
    wall = time.monotonic() - started
    lines = report.read_text(encoding="utf-8").splitlines() if report.is_file() else []
    outcomes = [_outcome(tree, json.loads(line)) for line in lines]
    if done is not None and not outcomes:
        # The segment died before its first story ended (an import error, say).
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        outcomes = [StoryOutcome(stories[0].stem, False, wall, crashed=last[0])]
    return outcomes, wall, timed_out


def _check_imported_from(tree: Path, written: dict[str, Any]) -> None:
    for package in ("scenarios", "agents_core"):
        where = Path(written.get(package, "")).resolve()
        if not where.is_relative_to(tree.resolve()):
            raise RuntimeError(
                f"the hunt imported {package} from {where}, not from the scratch tree {tree}: "
                f"the planted bug was not what ran (check PYTHONPATH and the editable install)"
            )


def clean_tree_passes(
    clean: Path, tree: Path, outcome: StoryOutcome, sdk: str | None = None
) -> bool:
    """Whether the finding is the bug's: some reproducer it wrote (or, for a failure without
    any drawn fault, the story itself) breaks no invariant and the liveness rule on the clean
    tree, with every invariant checked. A finding the clean tree shares is a bug of the tree,
    not of the zoo. As in the hunt, a step whose call failed with the drawn fault itself (the
    platform telling the caller the truth) is not a finding. With `sdk`, the replay runs on
    that release, as the hunt did (a story's own `sdk:` key may name another)."""
    tree_library = tree / "scenarios" / "library"
    files = [Path(p) for p in outcome.reproducers] or [tree_library / f"{outcome.story}.yaml"]
    replay = clean / "agentsim-replay" / tree.name
    replay.mkdir(parents=True, exist_ok=True)
    for number, path in enumerate(files):
        if not path.is_file():
            continue
        copy = replay / f"{number}-{path.name}"
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
        written = replay / f"failures-{number}"
        shutil.rmtree(written, ignore_errors=True)
        args = ["run", str(copy), "--invariants", "all", "--failures", str(written)]
        if sdk is not None:
            args += ["--sdk", sdk]
        try:
            done = _agentsim(clean, args, 300)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0 or not _clean_run_has_a_finding(written):
            return True
    return False


def _clean_run_has_a_finding(written: Path) -> bool:
    """Whether the failure file the clean tree's run wrote holds a finding, by the hunt's own
    rule (`is_finding`, with a step's own checks not counted, as `--invariants-only` has it)."""
    for path in sorted(written.glob("*.json")):
        record = read_run_record(path)
        if findings(record.failure_objects(), story=False):
            return True
    return False


def hunt(
    tree: Path,
    tool: Tool,
    stories: list[Path],
    budget_s: float,
    clean: Path,
    beyond_base: bool = False,
) -> HuntResult:
    """Hunt with `tool` over `stories` of `tree` until the first finding that is the bug's (see
    `clean_tree_passes`) or the end of the budget, which counts the tool's own time only.

    With `beyond_base`, a base run that shows the bug does not end the hunt: every base run is
    made, and the full hunts go on over the stories whose base run passed, until a finding
    there (`HuntResult.beyond`) or the budget's end."""
    shares = tool.shares(len(stories))
    result = HuntResult(tool.name, len(stories), shares)
    # Every story's base run first (each tool starts with it), so that a bug a base run shows
    # is not waited for behind the full hunts of slower stories; then the full hunts.
    if _hunt_pass(
        tree,
        tool,
        stories,
        tool.base_shares(),
        budget_s,
        clean,
        result,
        False,
        keep_going=beyond_base,
    ):
        return result
    if beyond_base:
        stories = [story for story in stories if story.stem not in result.base_failed]
    elif result.caught:
        return result
    _hunt_pass(tree, tool, stories, shares, budget_s, clean, result, True)
    return result


def _hunt_pass(
    tree: Path,
    tool: Tool,
    stories: list[Path],
    shares: tuple[int, ...],
    budget_s: float,
    clean: Path,
    result: HuntResult,
    full: bool,
    keep_going: bool = False,
) -> bool:
    """One pass of `tool` over `stories` at `shares`; True when it ended the hunt (a finding
    that is the bug's, or the budget spent). Only the full pass counts stories as run. With
    `keep_going` (a base pass that measures beyond the base runs) a finding only notes its
    story in `result.base_failed`, and the pass goes on."""
    remaining = list(stories)
    while remaining:
        left = budget_s - result.seconds
        if left <= 0:
            result.timed_out = True
            return True
        outcomes, wall, timed_out = run_segment(tree, tool, remaining, shares, left)
        result.seconds += wall
        remaining = remaining[len(outcomes) :]
        for outcome in outcomes:
            result.ran += 1 if full else 0
            for name, hits in outcome.probes.items():
                result.probes[name] = result.probes.get(name, 0) + hits
            if outcome.crashed:
                result.crashes.append(outcome)
            if outcome.found:
                if clean_tree_passes(clean, tree, outcome, tool.sdk):
                    if result.found_in is None:
                        result.found_in = outcome
                    if keep_going:
                        result.base_failed.append(outcome.story)
                        result.base_findings.append(outcome)
                        continue
                    if full:
                        result.beyond = outcome
                    return True
                result.shared.append(outcome)
        if timed_out:
            result.timed_out = True
            return True
    return False
