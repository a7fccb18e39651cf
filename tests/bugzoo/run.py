"""`python tests/bugzoo/run.py`: plant each zoo bug in a scratch tree and see whether the hunt
finds it.

For each bug: export the packages as committed at `--rev` (HEAD; `--worktree` takes the working
tree instead), apply its hunks in a scratch copy, and run `agentsim fuzz`
(and `agentsim explore`, once the tree has it) alone over the library stories of the bug's
areas, each tool with a fixed size split over those stories and at most `--budget-s` seconds of
its own time, stopping at the first finding that is the bug's: one whose reproducer passes on
the clean tree (a finding the clean tree shares is a bug of the tree; the hunt goes on with the
next story, and the line counts it as `shared`). Prints one line per bug as it goes, then the
table, the probes no hunt reached, and last `bugzoo: fuzz caught X/Y, explore caught Z/Y,
either W/Y`.

`--held-apart` hunts the held-apart set instead (`bugs_held_apart.py`, written without reading
the stories), always beyond the base runs, and reports it apart (`held_apart_report.py`): the
library stories' base runs, fuzz + explore beyond them, the time of each hunt, and last
`bugzoo held-apart: ...`. The measured set's line is printed for the measured set only.

`--set v0_32` hunts the SDK 0.32.0 set instead (`bugs_v0_32.py`, slips in the release's own
components written in the held-apart style): each bug on the release it is planted in (every
fuzz, explore and generate run with `--sdk 0.32.0`, and the clean tree's replay of a finding
too), hunted and reported as the held-apart set is, under its own title and last line
`bugzoo v0_32: ...`. `--sdk VERSION` runs every hunt of any set on that release instead.
The measured and held-apart sets are hunted on 0.21.0, the release they were written for and
measured on, whatever the default release is.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.bugzoo` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bugzoo.bugs_v0_32 import V0_32_RELEASE  # noqa: E402
from tests.bugzoo.catalogue import (  # noqa: E402
    ALL_BUGS,
    BUGS,
    HELD_APART,
    V0_32,
    stories_for,
    unknown_classes,
)
from tests.bugzoo.generate_hunt import hunt_generate  # noqa: E402
from tests.bugzoo.held_apart_report import GENERATE, held_apart_lines  # noqa: E402
from tests.bugzoo.hunting import (  # noqa: E402
    HuntResult,
    Tool,
    agentsim_has,
    copy_tree,
    detect_tools,
    export_revision,
    hunt,
)
from tests.bugzoo.model import Bug, PatchError, apply_bug  # noqa: E402

LIBRARY = Path("scenarios") / "library"
SETS = {"measured": BUGS, "held-apart": HELD_APART, "v0_32": V0_32}
"""The zoo's sets by name (`--set`)."""
V0_32_TITLE = (
    f"SDK {V0_32_RELEASE} set (its own components, written without reading the stories; hunted "
    f"on {V0_32_RELEASE} beyond the base runs):"
)


@dataclass(frozen=True)
class GenerateRun:
    """How generate hunts each held-apart bug."""

    examples: int
    seed: int
    limit_s: float

    def describe(self) -> str:
        return (
            f"generate ({self.examples} examples, seed {self.seed}, at most {self.limit_s:g} s "
            "per held-apart bug)"
        )


ZOO_RELEASE = "0.21.0"
"""The release the measured and held-apart sets were written for and measured on: a bug that
names no release of its own is hunted there, whatever the default release is."""


def sdk_of(bug: Bug, sdk: str | None) -> str:
    """The release `bug` is hunted on: `--sdk` when given, else the release it is planted in
    (`ZOO_RELEASE` for the measured and held-apart sets)."""
    return sdk or bug.release or ZOO_RELEASE


@dataclass
class BugResult:
    bug: Bug
    stories: int
    hunts: dict[str, HuntResult] = field(default_factory=dict)
    error: str = ""

    def caught_by(self, tool: str) -> bool:
        found = self.hunts.get(tool)
        return found is not None and found.caught


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python tests/bugzoo/run.py",
        description="Plant each zoo bug in a scratch tree and measure whether fuzz and explore "
        "find it.",
    )
    parser.add_argument("--only", metavar="ID,...", help="only these bugs (comma-separated)")
    parser.add_argument("--jobs", type=int, default=2, help="bugs hunted at once (2)")
    parser.add_argument(
        "--budget-s", type=float, default=60.0, help="seconds per tool and bug at most (60)"
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=320,
        help="fuzz examples per bug, split evenly over the bug's stories, 10 to 80 per story (320)",
    )
    parser.add_argument(
        "--crash-points",
        type=int,
        default=640,
        help="explore crash points per bug, split the same way, 20 to 160 per story (640)",
    )
    parser.add_argument(
        "--interleavings",
        type=int,
        default=160,
        help="explore interleavings per bug, split the same way, 5 to 40 per story (160)",
    )
    parser.add_argument(
        "--beyond-base",
        action="store_true",
        help="a bug a story's base run shows does not end its hunt: hunt on in the stories "
        "whose base run passes, and count what the hunt finds there on its own",
    )
    parser.add_argument(
        "--held-apart",
        action="store_true",
        help="hunt the held-apart set (bugs_held_apart.py) instead of the measured set, beyond "
        "the base runs, and report it apart (--only may name bugs of either set)",
    )
    parser.add_argument(
        "--set",
        choices=sorted(SETS),
        help="hunt this set of the zoo: measured (the default), held-apart (as --held-apart), "
        "or v0_32 (slips in SDK 0.32.0's own components, bugs_v0_32.py, each hunted on 0.32.0 "
        "beyond the base runs and reported apart)",
    )
    parser.add_argument(
        "--sdk",
        metavar="VERSION",
        help="run every hunt (fuzz, explore, generate, and the clean tree's replay of a finding) "
        "on this SDK release (default: a v0_32 bug's own release, else each story's sdk: key)",
    )
    parser.add_argument(
        "--hunters",
        metavar="NAMES",
        default="fuzz,explore,generate",
        help="the hunters to run, of fuzz, explore and generate, comma-separated (all that the "
        "tree has; generate hunts held-apart bugs only)",
    )
    parser.add_argument(
        "--generate-examples",
        type=int,
        default=2000,
        help="scenarios generate draws per held-apart bug, if the time limit allows (2000)",
    )
    parser.add_argument("--generate-seed", type=int, default=0, help="generate's fixed seed (0)")
    parser.add_argument(
        "--generate-limit-s",
        type=float,
        default=300.0,
        help="seconds of generate per held-apart bug at most (300)",
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the scratch trees in DIR")
    parser.add_argument(
        "--rev",
        default="HEAD",
        help="hunt in the packages as committed at this git revision (HEAD)",
    )
    parser.add_argument(
        "--worktree",
        action="store_true",
        help="hunt in the working tree's packages instead, uncommitted edits included",
    )
    return parser


def _set_name(args: argparse.Namespace) -> str:
    if args.held_apart and args.set not in (None, "held-apart"):
        raise SystemExit(f"--held-apart and --set {args.set} name two sets; give one")
    return "held-apart" if args.held_apart else args.set or "measured"


def _select(only: str | None, held_apart: bool = False, which: str | None = None) -> list[Bug]:
    if not only:
        return list(SETS[which or ("held-apart" if held_apart else "measured")])
    wanted = [word.strip() for word in only.split(",") if word.strip()]
    known = {bug.id: bug for bug in ALL_BUGS}
    unknown = [word for word in wanted if word not in known]
    if unknown:
        raise SystemExit(f"unknown bug id(s) {unknown}; known: {sorted(known)}")
    return [known[word] for word in wanted]


def _say(line: str) -> None:
    print(line, flush=True)


def _hunt_bug(
    bug: Bug,
    stories: list[Path],
    clean: Path,
    scratch: Path,
    tools: list[Tool],
    budget_s: float,
    beyond_base: bool = False,
    keep: bool = False,
    generate: GenerateRun | None = None,
    sdk: str | None = None,
) -> BugResult:
    result = BugResult(bug, len(stories))
    tree = scratch / bug.id
    copy_tree(tree, clean)
    try:
        try:
            apply_bug(bug, tree)
        except PatchError as exc:
            result.error = str(exc)
            return result
        paths = [tree / LIBRARY / story.name for story in stories]
        for tool in tools:
            result.hunts[tool.name] = hunt(
                tree, tool.on_release(sdk), paths, budget_s, clean, beyond_base
            )
        if generate is not None and bug.held_apart:
            result.hunts[GENERATE] = hunt_generate(
                tree,
                clean,
                bug.areas,
                examples=generate.examples,
                seed=generate.seed,
                limit_s=generate.limit_s,
                **({} if sdk is None else {"sdk": sdk}),
            )
    finally:
        if not keep:
            shutil.rmtree(tree, ignore_errors=True)
    return result


def _cell(result: BugResult, tool: str) -> str:
    found = result.hunts.get(tool)
    if found is None:
        return "n/a"
    if found.caught:
        assert found.found_in is not None
        where = found.found_in.story + (" (base run)" if found.found_in.base else "")
        if found.base_failed:  # --beyond-base: what the hunt found past the base runs
            past = f"then {found.beyond.story}" if found.beyond is not None else "then missed"
            return f"caught {found.seconds:5.1f} s in {where}, {past}"
        return f"caught {found.seconds:5.1f} s in {where}"
    notes = [f"{found.ran}/{found.stories} stories"]
    if found.shared:
        notes.append(f"{len(found.shared)} shared")
    if found.crashes:
        notes.append(f"{len(found.crashes)} crashed")
    if found.timed_out:
        notes.append("budget out")
    return f"missed {found.seconds:5.1f} s, {', '.join(notes)}"


def _first_failure(result: BugResult) -> str:
    for found in result.hunts.values():
        if found.caught and found.found_in is not None:
            return found.found_in.first_failure
    for found in result.hunts.values():
        if found.crashes:
            return f"(the tool crashed: {found.crashes[0].crashed})"
    return result.error or "-"


def _line(result: BugResult, tools: list[str]) -> str:
    cells = "  ".join(f"{tool}: {_cell(result, tool):<44}" for tool in tools)
    return f"{result.bug.id:<40} {cells} | {_first_failure(result)[:200]}"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bugs = _select(args.only, which=_set_name(args))
    if args.keep:
        # Kept for reading afterwards: a directory of its own in DIR, never removed.
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        return _in_scratch(args, bugs, Path(tempfile.mkdtemp(prefix="bugzoo-", dir=args.keep)))
    with tempfile.TemporaryDirectory(prefix="bugzoo-") as scratch_name:
        return _in_scratch(args, bugs, Path(scratch_name))


def _in_scratch(args: argparse.Namespace, bugs: list[Bug], scratch: Path) -> int:
    if args.worktree:
        clean = copy_tree(scratch / "_clean")
    else:
        clean = export_revision(scratch / "_clean", args.rev)
    return _run(args, bugs, scratch, clean)


def _run(args: argparse.Namespace, bugs: list[Bug], scratch: Path, clean: Path) -> int:
    library = clean / LIBRARY
    for story in sorted(library.glob("*.yaml")):
        if unknown_classes(story):
            _say(
                f"bugzoo: note: {story.name} uses agent classes no area knows "
                f"({unknown_classes(story)}); it counts for platform bugs only"
            )
    plans = {bug.id: stories_for(bug.areas, library) for bug in bugs}
    wanted = {word.strip() for word in args.hunters.split(",") if word.strip()}
    unknown = wanted - {"fuzz", "explore", GENERATE}
    if unknown:
        raise SystemExit(f"unknown hunter(s) {sorted(unknown)}; known: fuzz, explore, generate")
    tools, notes = detect_tools(clean, args.examples, args.crash_points, args.interleavings)
    tools = [tool for tool in tools if tool.name in wanted]
    generate, generate_note = _generate_run(args, clean, wanted, bugs)
    for note in notes:
        _say(f"bugzoo: {note}")
    names = [tool.name for tool in tools] + ([GENERATE] if generate is not None else [])
    described = [tool.describe() for tool in tools]
    if described:
        described[-1] += (
            f", split over each bug's stories; at most {args.budget_s:g} s per tool and bug"
        )
    if generate is not None:
        described.append(generate.describe())
    releases = sorted({release for bug in bugs if (release := sdk_of(bug, args.sdk))})
    if releases:
        described.append(f"on SDK {', '.join(releases)}")
    _say(f"bugzoo: {len(bugs)} bugs; {'; '.join(described)}; {args.jobs} jobs")
    started = time.monotonic()
    results: list[BugResult] = []

    def one(bug: Bug) -> BugResult:
        return _hunt_bug(
            bug,
            plans[bug.id],
            clean,
            scratch,
            tools,
            args.budget_s,
            args.beyond_base or bug.held_apart,
            keep=bool(args.keep),
            generate=generate,
            sdk=sdk_of(bug, args.sdk),
        )

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for number, result in enumerate(pool.map(one, bugs), start=1):
            results.append(result)
            _say(f"[{number:>2}/{len(bugs)}] {_line(result, names)}")
    _say("")
    _say(f"bugzoo: done in {time.monotonic() - started:.0f} s")
    _report(results, tools, notes)
    held = [result for result in results if result.bug.held_apart and not result.bug.release]
    if held:
        for line in held_apart_lines(held, names, generate_note):
            _say(line)
    on_release = [result for result in results if result.bug.release]
    if on_release:
        for line in held_apart_lines(
            on_release, names, generate_note, title=V0_32_TITLE, label="v0_32"
        ):
            _say(line)
    return 0


def _generate_run(
    args: argparse.Namespace, clean: Path, wanted: set[str], bugs: list[Bug]
) -> tuple[GenerateRun | None, str]:
    """How generate hunts the held-apart bugs (None: it does not), and the report's note."""
    if GENERATE not in wanted:
        return None, "not measured (not among --hunters)"
    if not any(bug.held_apart for bug in bugs):
        return None, "not measured (no held-apart bug selected)"
    if not agentsim_has(clean, GENERATE):
        return None, "not measured (this tree has no agentsim generate)"
    run = GenerateRun(args.generate_examples, args.generate_seed, args.generate_limit_s)
    return run, f"seed {run.seed}, {run.examples} examples, at most {run.limit_s:g} s per bug"


def _report(results: list[BugResult], tools: list[Tool], notes: list[str]) -> None:
    names = [tool.name for tool in tools]
    for result in results:
        _say(_line(result, names))
    reached: set[str] = set()
    for result in results:
        for found in result.hunts.values():
            reached |= set(found.probes)
    try:
        from sim.probes import ALL_PROBES, never_hit
    except ImportError:
        _say("probes: not measured (this tree has no sim.probes)")
    else:
        missed = never_hit(reached, ALL_PROBES)
        _say(
            f"probes no hunt reached ({len(missed)} of {len(ALL_PROBES)}): "
            + (", ".join(missed) if missed else "none")
        )
    planted = [r for r in results if not r.error and not r.bug.held_apart]
    if not any(not r.bug.held_apart for r in results):
        return  # the held-apart set has its own line
    total = len(planted)
    counts = {name: sum(r.caught_by(name) for r in planted) for name in ("fuzz", "explore")}
    either = sum(any(r.caught_by(name) for name in names) for r in planted)
    missing = "" if "explore" in names else " (explore not available)"
    # A bug that a story's base run already shows is the library's catch as much as the
    # hunt's: say how many the drawn faults or the enumerated points found (with --beyond-base,
    # in the stories whose base run passes, whatever the base runs showed elsewhere).
    hunted = sum(any(found.beyond is not None for found in r.hunts.values()) for r in planted)
    _say(
        f"bugzoo: fuzz caught {counts['fuzz']}/{total}, explore caught {counts['explore']}/"
        f"{total}, either {either}/{total}{missing}; "
        f"{hunted} of them found beyond the stories' base runs"
    )


if __name__ == "__main__":
    sys.exit(main())
