"""`agentsim`, the front door: run scenario files, validate them, render a trace for people.

Exit codes: 0 everything passed (or was valid), 1 some scenario failed, 2 bad input (a missing
path, an invalid scenario, an unknown command or flag, an unreadable trace). Bad input never
shows a traceback: it is one line on stderr saying what was wrong and what would be right.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from scenarios.errors import InvalidScenario
from scenarios.loader import load_scenario
from scenarios.runner import run_scenario
from scenarios.schema import Scenario
from sim.human import render_all
from sim.trace import Trace, TraceRecord

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class _BadInput(Exception):
    """A problem with what the user gave us, printed as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (argparse prints its usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {' '.join(message.split())}\n")


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return seed


def _parser() -> _Parser:
    parser = _Parser(
        prog="agentsim",
        description="Deterministic simulation testing for durable AI agents.",
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", required=True
    )
    run = commands.add_parser(
        "run",
        help="run scenario files (a directory means every *.yaml in it) and check them",
        description="Run scenarios and check their expectations; exit 0 if all pass, 1 if "
        "some fail, 2 on bad input.",
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="a scenario file or a directory")
    run.add_argument("--seed", type=_seed, help="run with this seed instead of the file's")
    run.add_argument("--trace", metavar="DIR", help="write each run's trace to DIR/NAME-SEED.jsonl")
    validate = commands.add_parser(
        "validate",
        help="check scenario files without running them",
        description="Check scenario files; exit 0 if all are valid, 2 otherwise.",
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="a scenario file or a directory")
    report = commands.add_parser(
        "report",
        help="print a trace file (JSONL, as written by run --trace) for people",
        description="Render a trace file, one line per record, stamped with sim time.",
    )
    report.add_argument("trace", metavar="TRACE.jsonl")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        if args.command == "run":
            return _run(args.paths, args.seed, args.trace, sys.stdout)
        if args.command == "validate":
            return _validate(args.paths, sys.stdout, sys.stderr)
        return _report(args.trace, sys.stdout)
    except _BadInput as exc:
        print(f"agentsim {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


# -- commands ---------------------------------------------------------------------------------
def _run(paths: Sequence[str], seed: int | None, trace_dir: str | None, out: TextIO) -> int:
    scenarios, errors = _load_all(_expand(paths))
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        return EXIT_BAD_INPUT
    _no_duplicate_names(scenarios)
    target = _trace_dir(trace_dir) if trace_dir is not None else None
    passed = failed = 0
    for scenario in scenarios:
        result = run_scenario(scenario, seed)
        print(result.report(), file=out, flush=True)
        if target is not None:
            try:
                result.trace.write_jsonl(target / f"{result.name}-{result.seed}.jsonl")
            except OSError as exc:
                raise _BadInput(f"cannot write the trace into {str(target)!r}: {exc}") from None
        passed, failed = (passed + 1, failed) if result.passed else (passed, failed + 1)
    print(f"{passed} passed, {failed} failed", file=out)
    return EXIT_OK if failed == 0 else EXIT_FAILED


def _validate(paths: Sequence[str], out: TextIO, err: TextIO) -> int:
    files = _expand(paths)
    scenarios, errors = _load_all(files)
    for scenario in scenarios:
        print(
            f"ok {scenario.path}: {scenario.name} ({len(scenario.steps)} steps, "
            f"{len(scenario.expect)} expectations)",
            file=out,
        )
    for error in errors:
        print(error, file=err)
    return EXIT_BAD_INPUT if errors else EXIT_OK


def _report(path: str, out: TextIO) -> int:
    text = render_all(_read_trace(path))
    if text:
        print(text, file=out)
    return EXIT_OK


def _read_trace(path: str) -> list[TraceRecord]:
    """The records of a JSONL trace; any line that is not one is bad input, named by line."""
    try:
        return Trace.read_jsonl(path)
    except ValueError as exc:
        raise _BadInput(str(exc)) from None


# -- helpers ----------------------------------------------------------------------------------
def _expand(paths: Sequence[str]) -> list[str]:
    """Files in the order given; a directory stands for its `*.yaml` files, sorted by name."""
    files: list[str] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(path.glob("*.yaml"), key=lambda p: p.name)
            if not found:
                raise _BadInput(f"no *.yaml scenario files in directory {given!r}")
            files += [str(p) for p in found if p.is_file()]
        elif path.is_file():
            files.append(given)
        else:
            raise _BadInput(f"no such file or directory: {given!r}")
    return list(dict.fromkeys(files))


def _load_all(files: Sequence[str]) -> tuple[list[Scenario], list[str]]:
    scenarios, errors = [], []
    for file in files:
        try:
            scenarios.append(load_scenario(file))
        except InvalidScenario as exc:
            errors.append(str(exc))
    return scenarios, errors


def _no_duplicate_names(scenarios: Sequence[Scenario]) -> None:
    by_name: dict[str, str] = {}
    for scenario in scenarios:
        earlier = by_name.setdefault(scenario.name, scenario.path)
        if earlier != scenario.path:
            raise _BadInput(
                f"two scenarios are named {scenario.name!r} ({earlier} and {scenario.path}); "
                f"names must be unique in one run, they name the trace files"
            )


def _trace_dir(given: str) -> Path:
    target = Path(given)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _BadInput(f"cannot create the trace directory {given!r}: {exc.strerror}") from None
    return target


if __name__ == "__main__":
    sys.exit(main())
