"""`agentsim generate`: the command line of the generate hunt (`scenarios.generate.hunt`).

`agentsim generate --examples N --seed S [--areas schedules,fibers,...] [--invariants ...]`
draws N scenarios, runs each with the invariants (all by default), and writes each finding,
shrunk, into `--out` (default `agentsim-generate/`), printing the command that runs it; the
coverage report follows. `--write DIR` writes the drawn scenarios into DIR without running
them. Exit 0 when nothing was found (or the files were written), 1 on a finding, 2 on bad
input. Progress goes as fuzz's does (`scenarios.cli.progress.HuntProgress`): a bar on a
terminal, a line on stderr every 15 s elsewhere.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from agents_core.releases.registry import DEFAULT_RELEASE
from scenarios.cli.inputs import add_sdk_flag, non_negative, output_directory, positive
from scenarios.cli.progress import HuntProgress, is_terminal
from scenarios.generate.hunt import generate, write_generated
from scenarios.generate.strategy import AREAS
from scenarios.language.releases import preview_notes
from scenarios.run.runner import invariant_names
from sim.upgrades import newer_releases

__all__ = ["GENERATE_DIR", "add_generate_parser", "area_list", "generate_command"]

GENERATE_DIR = "agentsim-generate"


def area_list(text: str) -> tuple[str, ...]:
    """`--areas A,B`: the names of generate's areas, in the order given."""
    areas = tuple(word.strip() for word in text.split(",") if word.strip())
    unknown = [area for area in areas if area not in AREAS]
    if unknown or not areas:
        raise argparse.ArgumentTypeError(
            f"unknown area(s) {unknown or [text]}; allowed: {list(AREAS)}, comma-separated"
        )
    return areas


def _invariants(text: str) -> tuple[str, ...]:
    try:
        names = invariant_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ("all",) if text.strip() == "all" else names


def add_generate_parser(commands: Any) -> None:
    """The `generate` subcommand and its flags."""
    parser = commands.add_parser(
        "generate",
        help="draw whole scenarios over the workloads with Hypothesis; write shrunk reproducers",
        description="Draw scenarios (schedules, fibers, agent tools, chat hosts and clients, "
        "with platform faults beside them), run each with every invariant, and write each "
        "failure, shrunk, as a scenario file that fails on its own. Exit 0 nothing found, 1 "
        "found, 2 bad input.",
    )
    parser.add_argument("--examples", type=positive, default=100, help="scenarios to draw (100)")
    parser.add_argument("--seed", type=non_negative, default=0, help="the Hypothesis seed (0)")
    parser.add_argument(
        "--areas",
        type=area_list,
        default=tuple(AREAS),
        metavar="AREAS",
        help=f"what the scenarios hold, of {','.join(AREAS)} (default: all)",
    )
    parser.add_argument(
        "--invariants",
        type=_invariants,
        default=("all",),
        metavar="NAMES",
        help="invariants every run checks (comma-separated; default: all)",
    )
    parser.add_argument(
        "--out", metavar="DIR", default=GENERATE_DIR, help=f"where reproducers go ({GENERATE_DIR})"
    )
    parser.add_argument(
        "--write", metavar="DIR", help="write the drawn scenarios into DIR and run nothing"
    )
    add_sdk_flag(parser, "the drawn scenarios (each reproducer names it)")
    parser.add_argument(
        "--upgrade",
        action="store_true",
        help="draw deploys that bring a newer SDK release than the run's too (off by default, "
        "so that a seed draws the scenarios it drew before)",
    )


def _command_line(args: argparse.Namespace) -> str:
    """How to draw the same scenarios again: every flag that changes what is drawn."""
    line = f"agentsim generate --examples {args.examples} --seed {args.seed}"
    if tuple(args.areas) != tuple(AREAS):
        line += f" --areas {','.join(args.areas)}"
    if tuple(args.invariants) != ("all",):
        line += f" --invariants {','.join(args.invariants)}"
    if args.sdk is not None:
        line += f" --sdk {args.sdk}"
    if args.upgrade:
        line += " --upgrade"
    return line


def generate_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run `agentsim generate`; the exit code."""
    if args.write is not None:
        output_directory(args.write, "--write")
        written = write_generated(
            examples=args.examples,
            seed=args.seed,
            out_dir=args.write,
            areas=args.areas,
            invariants=args.invariants,
            sdk=args.sdk,
            upgrade=args.upgrade,
        )
        for path in written:
            print(f"wrote {path}", file=out)
        print(f"{len(written)} scenarios written to {args.write} (not run)", file=out)
        return 0
    start = DEFAULT_RELEASE if args.sdk is None else args.sdk
    for note in preview_notes(
        [start, *(newer_releases(start) if args.upgrade else ())], "agentsim generate"
    ):
        print(note, file=err)
    found = [0]
    shown = HuntProgress(
        out, err, "generate", args.examples, lambda: found[0], terminal=is_terminal(out)
    )

    def ran(label: str, failed: bool) -> None:
        if failed and not label.startswith("shrinking"):
            found[0] += 1
        shown.advance(label)

    with shown:
        outcome = generate(
            examples=args.examples,
            seed=args.seed,
            areas=args.areas,
            invariants=args.invariants,
            out_dir=args.out,
            command=_command_line(args),
            on_run=ran,
            sdk=args.sdk,
            upgrade=args.upgrade,
        )
    print(outcome.report(), file=out)
    return 1 if outcome.found else 0
