"""`agentsim`, the front door: run scenarios over seeds, replay failures, fuzz, keep golden traces.

Commands: `run`, `validate`, `replay`, `report`, `library`, `schema`, `fuzz`, `explore`,
`generate`, `golden` (`agentsim --help`, `agentsim --version`).
Exit codes: 0 everything passed (or was valid), 1 something failed (a scenario, a replay that did
not reproduce, a fuzz finding, a golden diff), 2 bad input (a missing path, an invalid scenario,
an unknown command or flag, an unreadable trace or failure file). Bad input never shows a
traceback: it is one line on stderr saying what was wrong and what would be right.

Every failing run prints the command that replays it, last, and writes a failure file
(`scenarios.run.failures`) that `agentsim replay` re-runs. On a terminal a run over many scenarios
or seeds shows a progress bar (`scenarios.cli.progress`); in a pipe or CI it prints lines only.
`run --workers N` and `run --dask ADDRESS` spread the runs over processes or a Dask cluster
(`scenarios.cli.sweeps`) and print exactly what a serial run prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from reports import RunReport, read_trace_cut, render_html, render_junit, render_summary
from scenarios.cli.diff_generate import add_diff_generate_flags, diff_generate_command
from scenarios.cli.generate_command import add_generate_parser, generate_command
from scenarios.cli.inputs import (
    PathProblem,
    add_budget_flags,
    add_sdk_flag,
    budget_flags,
    budgets_in_command,
    expand_paths,
    input_file,
    library_dir,
    non_negative,
    output_directory,
    output_file,
    positive,
    scenario_files_in,
    sdk_in_command,
    seed_range,
    skipped_note,
    writable,
    write_text,
    write_trace,
    write_whole,
)
from scenarios.cli.interrupted import interrupted_line, with_not_run
from scenarios.cli.progress import HuntProgress, RunProgress, is_terminal
from scenarios.cli.sweeps import SweepFailed, SweepInputError, SweepSettings, add_sweep_flags, sweep
from scenarios.hunt.explore import ExploreInputError, explore_command
from scenarios.hunt.fuzz import FAULT_KINDS, FUZZ_KINDS, FlakyFinding, fuzz_scenario
from scenarios.language.errors import InvalidScenario, printable
from scenarios.language.json_schema import scenario_json_schema
from scenarios.language.loader import load_scenario
from scenarios.language.releases import preview_notes, releases_run, upgrade_problems
from scenarios.language.schema import InvariantsExpectation, Scenario
from scenarios.run.determinism import run_checked
from scenarios.run.failures import (
    RunRecord,
    agentsim_version,
    failure_file_name,
    replay_file,
    report_of_trace,
)
from scenarios.run.golden import check_golden, write_golden
from scenarios.run.runner import ScenarioResult, budget_overrides, invariant_names, run_scenario
from sim.checkers import CHECKERS
from sim.probes import coverage_line
from sim.record_text import render_all
from sim.trace import Trace, TraceRecord

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
"""128 + SIGINT, as shells report a command stopped by Ctrl-C."""
FAILURES_DIR = "agentsim-failures"
FUZZ_DIR = "agentsim-fuzz"


class _BadInput(Exception):
    """A problem with what the user gave us, printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (argparse prints its usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {' '.join(message.split())}\n")


# -- argument types -----------------------------------------------------------------------------
def _invariants(text: str) -> tuple[str, ...]:
    try:
        return invariant_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fault_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(word.strip() for word in text.split(",") if word.strip())
    unknown = [kind for kind in kinds if kind not in FUZZ_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind(s) {unknown or [text]}; allowed: {list(FUZZ_KINDS)}, "
            f"comma-separated"
        )
    return kinds


# -- the parser ---------------------------------------------------------------------------------
def _parser() -> _Parser:
    parser = _Parser(
        prog="agentsim",
        description="Deterministic simulation testing for durable AI agents.",
    )
    parser.add_argument("--version", action="version", version=f"agentsim {agentsim_version()}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", required=True
    )
    run = commands.add_parser(
        "run",
        help="run scenario files (a directory means every *.yaml in it) and check them",
        description="Run scenarios and check their expectations; exit 0 if all pass, 1 if "
        "some fail, 2 on bad input. Each failure prints its replay command and writes a "
        "failure file for `agentsim replay`.",
    )
    run.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a scenario file or a directory (its *.yaml and *.yml files, at any depth)",
    )
    run.add_argument(
        "--library",
        action="store_true",
        help="also run the scenarios bundled with agentsim (`agentsim library` lists them)",
    )
    seeds = run.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=non_negative, help="run with this seed instead of the file's")
    seeds.add_argument(
        "--seeds",
        type=seed_range,
        metavar="A..B",
        help="run each seed from A to B (both included)",
    )
    run.add_argument("--trace", metavar="DIR", help="write each run's trace to DIR/NAME-SEED.jsonl")
    run.add_argument(
        "--junit", metavar="FILE", help="write JUnit XML (a case per scenario and seed)"
    )
    run.add_argument(
        "--html", metavar="DIR", help="write an HTML report per run: DIR/NAME-SEED.html"
    )
    run.add_argument(
        "--failures",
        metavar="DIR",
        default=FAILURES_DIR,
        help=f"where failure files go (default: {FAILURES_DIR})",
    )
    run.add_argument(
        "--invariants",
        type=_invariants,
        default=(),
        metavar="NAMES",
        help="also check these named invariants (comma-separated, or 'all')",
    )
    run.add_argument(
        "--check-determinism",
        action="store_true",
        help="run each scenario and seed twice (the second time in a fresh Simulation) and "
        "fail naming the first divergent trace record",
    )
    run.add_argument(
        "--check-determinism-subprocess",
        action="store_true",
        help="the same, the second run in a child process under another PYTHONHASHSEED",
    )
    add_sdk_flag(run)
    add_budget_flags(run)
    add_sweep_flags(run)
    validate = commands.add_parser(
        "validate",
        help="check scenario files without running them",
        description="Check scenario files; exit 0 if all are valid, 2 otherwise.",
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="a scenario file or a directory")
    replay = commands.add_parser(
        "replay",
        help="re-run a failure file (and say whether it reproduced) or a scenario file",
        description="Re-run a failure file written by `agentsim run` and say whether the "
        "failure reproduced (exit 1 either way: a failure that does not come back is not a "
        "pass), or run a scenario file with its own seed.",
    )
    replay.add_argument("file", metavar="FILE", help="a failure file (.json) or a scenario file")
    replay.add_argument("--failures", metavar="DIR", default=FAILURES_DIR, help=argparse.SUPPRESS)
    report = commands.add_parser(
        "report",
        help="print a trace file (JSONL, as written by run --trace) for people, or render HTML",
        description="Render a trace file, one line per record, stamped with sim time; with "
        "--html, write the HTML report of the run instead.",
    )
    report.add_argument("trace", metavar="TRACE.jsonl")
    report.add_argument("--html", metavar="FILE", help="write the self-contained HTML report")
    commands.add_parser(
        "library",
        help="list the scenarios bundled with agentsim (run them with `agentsim run --library`)",
        description="List the bundled scenario library: each scenario's name, file and what "
        "it shows.",
    )
    commands.add_parser(
        "schema",
        help="print the JSON Schema of scenario files (for editors)",
        description="Print the JSON Schema of the scenario format.",
    )
    fuzz = commands.add_parser(
        "fuzz",
        help="draw fault schedules over a scenario with Hypothesis; write a reproducer",
        description="Insert drawn evictions, deploys, storage faults, client reconnects and "
        "repeated calls into a scenario (and, with `--faults ...,tune`, set its agents' options "
        "at drawn values); check its expectations and the named invariants, and write the "
        "shrunk failing schedule as a runnable scenario. Exit 1 when a failure is found.",
    )
    fuzz.add_argument("path", metavar="PATH", help="the base scenario file")
    fuzz.add_argument("--examples", type=positive, default=100, help="schedules to try (100)")
    fuzz.add_argument("--seed", type=non_negative, default=0, help="the Hypothesis seed (0)")
    fuzz.add_argument(
        "--invariants",
        type=_invariants,
        default=None,
        metavar="NAMES",
        help="invariants to check besides the file's expectations (default: all)",
    )
    fuzz.add_argument(
        "--invariants-only",
        action="store_true",
        help="check the invariants alone, not the file's expectations (a story's exact times "
        "and counts change under any drawn fault)",
    )
    fuzz.add_argument(
        "--faults",
        type=_fault_kinds,
        default=FAULT_KINDS,
        metavar="KINDS",
        help=f"fault kinds to draw, of {','.join(FUZZ_KINDS)} (`tune`: agents' options; default: "
        f"{','.join(FAULT_KINDS)})",
    )
    fuzz.add_argument("--max-steps", type=positive, default=4, help="drawn steps at most (4)")
    fuzz.add_argument(
        "--out", metavar="DIR", default=FUZZ_DIR, help=f"where reproducers go ({FUZZ_DIR})"
    )
    add_sdk_flag(fuzz, "the base scenario and every drawn schedule")
    add_budget_flags(fuzz)
    explore = commands.add_parser(
        "explore",
        help="crash at every kind of point and reorder same-instant timers; write reproducers",
        description="Run the scenario once, then again with a crash at each chosen statement or "
        "commit and with same-instant timers reordered (PCT-style); check every invariant and "
        "the liveness rule, and write each distinct failure as a runnable scenario. Exit 0 "
        "nothing found, 1 found, 2 bad input.",
    )
    explore.add_argument("path", metavar="FILE", help="the base scenario file")
    explore.add_argument(
        "--crash-points",
        type=non_negative,
        default=300,
        metavar="N",
        help="crash points to run (300)",
    )
    explore.add_argument(
        "--interleavings",
        type=non_negative,
        default=50,
        metavar="N",
        help="interleavings to run (50)",
    )
    explore.add_argument(
        "--depth", type=positive, default=2, help="groups reordered per interleaving, at most (2)"
    )
    explore.add_argument(
        "--with-expect",
        action="store_true",
        help="keep the file's expectations (left out by default: a crash changes a story)",
    )
    explore.add_argument(
        "--out", metavar="DIR", default="agentsim-explore", help="where reproducers go"
    )
    explore.add_argument(
        "--all-probes", action="store_true", help="name every probe no run reached"
    )
    add_sdk_flag(explore, "the base scenario and every crash point and interleaving")
    add_budget_flags(explore)
    golden = commands.add_parser(
        "golden",
        help="compare scenarios' runs with their golden traces (NAME.golden), or --update them",
        description="Compare each scenario's short log with NAME.golden beside it; exit 1 on "
        "a difference or a missing file. --update writes them.",
    )
    golden.add_argument("paths", nargs="+", metavar="PATH", help="a scenario file or a directory")
    golden.add_argument("--update", action="store_true", help="write the golden files")
    add_sdk_flag(golden)
    add_generate_parser(commands)
    diff = commands.add_parser(
        "diff",
        help="run scenarios in agentsim and on the real Agents SDK in workerd; compare traces",
        description="Run each scenario in agentsim and on the real SDK in workerd (the npm "
        "project in differential/), normalise both traces and compare them: one AGREE, "
        "DIFFER, UNSTABLE or SKIP line each. Exit 0 when nothing differs, 1 when something "
        "differs or is unstable, 2 for bad input.",
    )
    diff.add_argument("paths", nargs="*", metavar="PATH", help="a scenario file or a directory")
    diff.add_argument(
        "--repeat",
        type=positive,
        default=None,
        help="plays of the real side per scenario (3; with --generate 2)",
    )
    diff.add_argument("--sdk", metavar="VERSION", help="play on this npm version of agents")
    add_diff_generate_flags(diff)
    return parser


def console() -> None:
    """The console script: `main`, then leave with its exit code.

    After Ctrl-C everything owed is already written (the JUnit file, the summary, the failure
    files) and the pool's workers are stopped. The interpreter's own exit would then join the
    process pool's manager thread, which can wait for ever on a worker stopped in the middle
    of sending a result; so an interrupted command leaves at once instead."""
    code = main()
    if code == EXIT_INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    out, err = sys.stdout, sys.stderr
    try:
        with budget_overrides(**budget_flags(args)):
            return _command(args, out, err)
    except _BadInput as exc:
        print(printable(f"agentsim {args.command}: error: {exc}"), file=err)
        return EXIT_BAD_INPUT
    except PathProblem as exc:
        print(printable(f"agentsim {args.command}: error: {exc}"), file=err)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `agentsim ... | head`: the reader left; no traceback for that
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback. The failure files of finished runs are already
        # written, one per run as it ends, and stay.
        with contextlib.suppress(OSError, ValueError):
            out.flush()
        with contextlib.suppress(OSError, ValueError):
            print(f"agentsim {args.command}: interrupted", file=err, flush=True)
        return EXIT_INTERRUPTED


def _command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "run":
        return _run(args, out, err)
    if args.command == "validate":
        return _validate(args.paths, out, err)
    if args.command == "replay":
        return _replay(args, out, err)
    if args.command == "report":
        return _report(args.trace, args.html, out, err)
    if args.command == "library":
        return _library(out)
    if args.command == "schema":
        return _schema(out)
    if args.command == "fuzz":
        return _fuzz(args, out, err)
    if args.command == "explore":
        return _explore(args, out, err)
    if args.command == "generate":
        return generate_command(args, out, err)
    if args.command == "diff":
        return _diff(args, out, err)
    return _golden(args, out, err)


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`diff PATH...`, or `diff --generate N` (not both)."""
    if bool(args.paths) == (args.generate is not None):
        print("agentsim diff: error: give scenario PATHs or --generate N, not both", file=err)
        return 2
    if args.generate is not None:
        args.repeat = args.repeat or 2
        return diff_generate_command(args, out, err)
    from scenarios.diff import diff_command  # the differential stage, loaded only for it

    return diff_command(args.paths, args.repeat or 3, args.sdk, out, err)


# -- run ----------------------------------------------------------------------------------------
def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if getattr(args, "library", False):
        args.paths = [*args.paths, str(library_dir())]
    if not args.paths:
        raise _BadInput("no scenario given; name files or directories, or give --library")
    scenarios = _load_or_report(args.paths, err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenarios = _on_release(scenarios, getattr(args, "sdk", None), args.command, err)
    _no_duplicate_names(scenarios)
    _writable_outputs(args)
    seeds: list[int | None] = list(args.seeds) if args.seeds else [args.seed]
    trace_dir = output_directory(args.trace, "trace") if args.trace else None
    html_dir = output_directory(args.html, "HTML") if args.html else None
    many = len(seeds) > 1
    runs = [(scenario, seed) for scenario in scenarios for seed in seeds]
    reports: list[RunReport] = []
    reaching: dict[str, int] = {}
    _warn_unchecked(scenarios, args, err)
    results = _results(runs, args)
    interrupted = False
    try:
        with RunProgress(out, len(runs), terminal=is_terminal(out)) as progress:
            for (scenario, _seed), result in zip(runs, results, strict=True):
                for name in result.probes:
                    reaching[name] = reaching.get(name, 0) + 1
                notes = _keep(result, args, trace_dir, html_dir, reports)
                if not many or not result.passed:
                    progress.print(printable(_verdict_text(result, scenario, args, notes)))
                progress.advance(f"{scenario.name} seed={result.seed}")
    except KeyboardInterrupt:
        # Ctrl-C: the pending runs are cancelled (closing the sweep stops its workers), and
        # what finished is summed up and written as if the sweep had been that long.
        interrupted = True
        results.close()
    if many:
        for scenario in scenarios:  # passes are counted, not printed: say what each checked
            checked = f"{scenario.name}: each run checked {_checked(scenario, args)}"
            print(printable(checked), file=out)
        print(printable(render_summary(reports)), file=out)
        print(coverage_line(reaching, len(runs)), file=out)
    not_run = [(s.name, s.path, seed) for s, seed in runs[len(reports) :]] if interrupted else []
    if args.junit:
        write_text(args.junit, with_not_run(render_junit(reports), not_run), "JUnit XML")
    failed = sum(1 for report in reports if not report.passed)
    if interrupted:
        print(interrupted_line(len(reports), len(runs)), file=out)
        print(f"{len(reports) - failed} passed, {failed} failed, {len(not_run)} not run", file=out)
        out.flush()
        print(f"agentsim {args.command}: interrupted", file=err, flush=True)
        return EXIT_INTERRUPTED
    print(f"{len(reports) - failed} passed, {failed} failed", file=out, flush=True)
    return EXIT_OK if failed == 0 else EXIT_FAILED


def _writable_outputs(args: argparse.Namespace) -> None:
    """Every path an output flag names is checked before the first run: a long sweep's JUnit
    is not lost at its end to a path that cannot be written. The default failure folder is not
    (a failure file that cannot be written is a note under its failure, and a run that passes
    writes none)."""
    if args.junit:
        output_file(args.junit, "JUnit report", "junit.xml")
        writable(args.junit, "--junit", directory=False)
    for flag, value in (("--trace", args.trace), ("--html", args.html)):
        if value:
            writable(value, flag, directory=True)
    if getattr(args, "failures", FAILURES_DIR) != FAILURES_DIR:
        writable(args.failures, "--failures", directory=True)


def _results(
    runs: Sequence[tuple[Scenario, int | None]], args: argparse.Namespace
) -> Generator[ScenarioResult, None, None]:
    """The runs' results in their order: here, or on `--workers N` processes or `--dask`
    (`scenarios.cli.sweeps`), which give the same results."""
    workers, dask = getattr(args, "workers", 1), getattr(args, "dask", None)
    if workers <= 1 and dask is None:
        yield from (_execute(scenario, seed, args) for scenario, seed in runs)
        return
    settings = SweepSettings(
        invariants=tuple(args.invariants),
        check_determinism=getattr(args, "check_determinism", False),
        in_subprocess=getattr(args, "check_determinism_subprocess", False),
        budgets=tuple((k, v) for k, v in budget_flags(args).items() if v is not None),
        keep_records=bool(args.trace or args.html or args.junit),
        sdk=getattr(args, "sdk", None),
    )
    try:
        yield from sweep(runs, settings, workers=workers, dask=dask)
    except (SweepInputError, SweepFailed) as exc:
        raise _BadInput(str(exc)) from None


def _invariants_checked(scenario: Scenario, args: argparse.Namespace) -> list[str]:
    """The named invariants a run of `scenario` checks: its file's and the command line's."""
    names = [
        name for e in scenario.expect if isinstance(e, InvariantsExpectation) for name in e.names
    ]
    return list(dict.fromkeys([*names, *getattr(args, "invariants", ())]))


def _checked(scenario: Scenario, args: argparse.Namespace) -> str:
    """What a PASS stands for: `3 expectations, invariants: a, b, determinism checked`."""
    count = len(scenario.expect)
    parts = [f"{count} expectation{'' if count == 1 else 's'}"]
    names = _invariants_checked(scenario, args)
    if not names:
        parts.append("no invariants")
    elif set(names) == set(CHECKERS):
        parts.append(f"invariants: all {len(names)}")
    elif len(names) > 4:
        parts.append(f"invariants: {', '.join(names[:4])} and {len(names) - 4} more")
    else:
        parts.append(f"invariants: {', '.join(names)}")
    subprocess_check = getattr(args, "check_determinism_subprocess", False)
    if subprocess_check:
        parts.append("determinism checked in a child process")
    elif getattr(args, "check_determinism", False):
        parts.append("determinism checked")
    else:
        parts.append("determinism not checked")
    return ", ".join(parts)


def _verdict_text(
    result: ScenarioResult, scenario: Scenario, args: argparse.Namespace, notes: list[str]
) -> str:
    """A PASS line says what it checked; a FAIL is the result's own report."""
    if not result.passed:
        return result.report(notes)
    return f"{result.report(notes)} (checked {_checked(scenario, args)})"


def _warn_unchecked(scenarios: Sequence[Scenario], args: argparse.Namespace, err: TextIO) -> None:
    """A scenario that checks nothing passes whenever its steps raise nothing and it settles:
    say so, once per scenario, before its runs."""
    for scenario in scenarios:
        if scenario.expect or _invariants_checked(scenario, args):
            continue
        print(
            printable(
                f"agentsim {args.command}: warning: {scenario.path}: scenario {scenario.name!r} "
                f"has no expectation and no invariant, so its PASS only says that its steps "
                f"raised nothing and it settled; add expect: to the file, or --invariants all"
            ),
            file=err,
        )


def _execute(scenario: Scenario, seed: int | None, args: argparse.Namespace) -> ScenarioResult:
    subprocess_check = getattr(args, "check_determinism_subprocess", False)
    if getattr(args, "check_determinism", False) or subprocess_check:
        try:
            return run_checked(
                scenario, seed, invariants=args.invariants, in_subprocess=subprocess_check
            )
        except (ValueError, RuntimeError) as exc:
            raise _BadInput(str(exc)) from None
    return run_scenario(scenario, seed, invariants=args.invariants)


def _keep(
    result: ScenarioResult,
    args: argparse.Namespace,
    trace_dir: Path | None,
    html_dir: Path | None,
    reports: list[RunReport],
) -> list[str]:
    """Write what the flags ask for; the notes to print under a failure."""
    record = RunRecord.of(
        result,
        check_determinism=getattr(args, "check_determinism", False),
        in_subprocess=getattr(args, "check_determinism_subprocess", False),
    )
    stem = f"{result.name}-{result.seed}"
    if trace_dir is not None:
        write_trace(result.trace, trace_dir / f"{stem}.jsonl")
        write_text(trace_dir / f"{stem}.run.json", record.to_json(), "run record")

    def report_of(records: list[dict]) -> RunReport:
        return RunReport.from_records(
            name=result.name,
            path=result.path,
            seed=result.seed,
            passed=result.passed,
            failures=result.failures,
            replay_command=result.replay,
            records=records,
            digest=result.digest,
            description=result.description,
            wall_s=result.wall_s,
        )

    records = [r.to_dict() for r in result.trace]
    if html_dir is not None:
        write_text(html_dir / f"{stem}.html", render_html(report_of(records)), "HTML report")
    # Kept for the summary (which needs no records) and JUnit (which does) at the end.
    reports.append(report_of(records if args.junit else []))
    if result.passed:
        return []
    target = Path(args.failures) / failure_file_name(result.name, result.seed)
    try:
        write_whole(target, record.to_json())
    except OSError as exc:
        return [f"failure file: not written ({exc.strerror or exc})"]
    return [f"failure file: {target} (re-run it: agentsim replay {target})"]


# -- validate, replay ---------------------------------------------------------------------------
def _validate(paths: Sequence[str], out: TextIO, err: TextIO) -> int:
    skipped: list[Path] = []
    scenarios, errors = _load_all(expand_paths(paths, skipped))
    if skipped:
        print(printable(f"agentsim validate: {skipped_note(skipped)}"), file=err)
    for scenario in scenarios:
        print(
            printable(
                f"ok {scenario.path}: {scenario.name} ({len(scenario.steps)} steps, "
                f"{len(scenario.expect)} expectations)"
            ),
            file=out,
        )
    for error in errors:
        print(printable(error), file=err)
    return EXIT_BAD_INPUT if errors else EXIT_OK


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = input_file(args.file, "failure file or scenario file")
    if path.suffix != ".json":
        args.paths = [args.file]
        args.seed, args.seeds, args.trace, args.junit, args.html = None, None, None, None, None
        args.invariants, args.sdk = (), None
        return _run(args, out, err)
    recorded = _recorded_replay(path)
    sdk = sdk_in_command(recorded)
    for note in preview_notes([] if sdk is None else [sdk], "agentsim replay"):
        print(printable(note), file=err)
    try:
        with budget_overrides(**budgets_in_command(recorded)):
            code, lines = replay_file(args.file, sdk=sdk)
    except (ValueError, InvalidScenario) as exc:
        raise _BadInput(str(exc)) from None
    for line in lines:
        print(printable(line), file=out)
    return code


def _recorded_replay(path: Path) -> str:
    """The replay command a failure file records ('' when it cannot be read: `replay_file`
    then says what is wrong with the file)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    replay = record.get("replay") if isinstance(record, dict) else None
    return replay if isinstance(replay, str) else ""


# -- library, report, schema --------------------------------------------------------------------
def _library(out: TextIO) -> int:
    scenarios, errors = _load_all([str(p) for p in scenario_files_in(library_dir())])
    if errors:
        raise _BadInput(errors[0])
    for scenario in scenarios:
        summary = " ".join(scenario.description.split())
        if len(summary) > 160:
            summary = summary[:157] + "..."
        print(printable(f"{scenario.name}  {summary}"), file=out)
    print(
        f"{len(scenarios)} scenarios in {library_dir()}; run them with: agentsim run --library",
        file=out,
    )
    return EXIT_OK


def _report(path: str, html: str | None, out: TextIO, err: TextIO) -> int:
    input_file(path, "trace file (JSONL)")
    if html is not None:
        output_file(html, "HTML report", "report.html")
    # A trace cut in the middle of its last record (a run killed while writing) is reported
    # up to the cut, which stderr (and the page) names; a bad line before it is bad input.
    try:
        records, cut = read_trace_cut(path)
    except (OSError, ValueError) as exc:
        if html is None:
            _read_trace(path)  # the printed report's own wording for a bad line
        raise _BadInput(str(exc)) from None
    if not records:
        raise _BadInput(f"{path!r} holds no trace record (an empty file is not a trace)")
    notes = [] if cut is None else [cut.sentence(path, len(records))]
    if html is None:
        trace = _read_trace(path) if cut is None else _trace_records(path, records)
        print(printable(render_all(trace)), file=out)
    else:
        try:
            run = report_of_trace(path, records, notes)
        except ValueError as exc:
            raise _BadInput(str(exc)) from None
        write_text(html, render_html(run), "HTML report")
        print(f"wrote {html}", file=out)
    for note in notes:
        print(printable(f"agentsim report: warning: {note}"), file=err)
    return EXIT_OK


def _trace_records(path: str, records: list[dict[str, Any]]) -> list[TraceRecord]:
    try:
        return [TraceRecord.from_dict(record) for record in records]
    except (ValueError, KeyError, TypeError) as exc:
        raise _BadInput(f"{path}: not a trace record ({type(exc).__name__}: {exc})") from None


def _read_trace(path: str) -> list[TraceRecord]:
    """The records of a JSONL trace; any line that is not one is bad input, named by line."""
    try:
        return Trace.read_jsonl(path)
    except ValueError as exc:
        raise _BadInput(str(exc)) from None


def _schema(out: TextIO) -> int:
    print(json.dumps(scenario_json_schema(), indent=2, ensure_ascii=False), file=out)
    return EXIT_OK


# -- fuzz, golden -------------------------------------------------------------------------------
def _fuzz(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    input_file(args.path, "scenario file")
    # The header says how to find it again: every option that changes what is drawn.
    command = f"agentsim fuzz {args.path} --seed {args.seed} --examples {args.examples}"
    if args.invariants_only:
        command += " --invariants-only"
    if args.invariants is not None:
        command += f" --invariants {','.join(args.invariants)}"
    if tuple(args.faults) != FAULT_KINDS:
        command += f" --faults {','.join(args.faults)}"
    if args.max_steps != 4:
        command += f" --max-steps {args.max_steps}"
    if args.sdk is not None:
        command += f" --sdk {args.sdk}"
    failing = [0]
    what = f"fuzz {Path(args.path).stem}"
    shown = HuntProgress(
        out, err, what, args.examples, lambda: min(failing[0], 1), terminal=is_terminal(out)
    )

    def ran(label: str, failed: bool) -> None:
        failing[0] += failed
        shown.advance(label)

    try:
        with shown:
            outcome = fuzz_scenario(
                args.path,
                examples=args.examples,
                seed=args.seed,
                invariants=args.invariants,
                kinds=args.faults,
                max_steps=args.max_steps,
                out_dir=args.out,
                command=command,
                invariants_only=args.invariants_only,
                on_run=ran,
                sdk=args.sdk,
                on_releases=lambda names: _print_previews(names, "agentsim fuzz", err),
            )
    except InvalidScenario as exc:
        raise _BadInput(str(exc)) from None
    except FlakyFinding as exc:
        print(printable(f"FLAKY: {exc}"), file=out)
        return EXIT_FAILED
    except (ValueError, OSError) as exc:
        raise _BadInput(str(exc)) from None
    print(printable(outcome.report()), file=out)
    return EXIT_FAILED if outcome.found else EXIT_OK


def _explore(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    input_file(args.path, "scenario file")
    try:
        return explore_command(args, out, err)
    except (InvalidScenario, ExploreInputError) as exc:
        raise _BadInput(str(exc)) from None


def _golden(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    files = expand_paths(args.paths)
    scenarios, errors = _load_all(files)
    if errors:
        raise _BadInput(errors[0])
    _on_release(scenarios, args.sdk, args.command, err)
    bad = 0
    for file in files:
        check = write_golden(file, args.sdk) if args.update else check_golden(file, args.sdk)
        if args.update:
            print(f"{check.status} {check.golden}", file=out)
        elif check.ok:
            print(f"ok {check.golden}", file=out)
        if not check.ok:
            bad += 1
            print(printable(f"FAIL {check.explain().rstrip()}"), file=out)
    return EXIT_FAILED if bad else EXIT_OK


# -- helpers ------------------------------------------------------------------------------------
def _load_all(files: Sequence[str]) -> tuple[list[Scenario], list[str]]:
    scenarios, errors = [], []
    for file in files:
        try:
            scenarios.append(load_scenario(file))
        except InvalidScenario as exc:
            errors += exc.lines()  # every mistake of the file, one line each
    return scenarios, errors


def _load_or_report(paths: Sequence[str], err: TextIO) -> list[Scenario] | None:
    skipped: list[Path] = []
    scenarios, errors = _load_all(expand_paths(paths, skipped))
    if skipped:
        print(printable(f"agentsim run: {skipped_note(skipped)}"), file=err)
    for error in errors:
        print(printable(error), file=err)
    return None if errors else scenarios


def _on_release(
    scenarios: Sequence[Scenario], sdk: str | None, command: str, err: TextIO
) -> list[Scenario]:
    """The scenarios on release `sdk` (the `--sdk` flag; None: each as its file says), a deploy
    that would downgrade from it refused as bad input, and the note of a preview release
    printed once."""
    chosen = [scenario.on_release(sdk) for scenario in scenarios]
    for scenario in chosen:
        problems = upgrade_problems(scenario)
        if problems:
            raise _BadInput(f"{problems[0]} (the run starts on {scenario.sdk}: --sdk {sdk})")
    _print_previews(releases_run(chosen), f"agentsim {command}", err)
    return chosen


def _print_previews(releases: Sequence[str], command: str, err: TextIO) -> None:
    for note in preview_notes(releases, command):
        print(printable(note), file=err)


def _no_duplicate_names(scenarios: Sequence[Scenario]) -> None:
    by_name: dict[str, str] = {}
    for scenario in scenarios:
        earlier = by_name.setdefault(scenario.name, scenario.path)
        if earlier != scenario.path:
            raise _BadInput(
                f"two scenarios are named {scenario.name!r} ({earlier} and {scenario.path}); "
                f"names must be unique in one run, they name the trace files"
            )


if __name__ == "__main__":
    sys.exit(main())
