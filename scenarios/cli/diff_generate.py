"""`agentsim diff --generate N --seed S`: the command line of the generated differential hunt
(`scenarios.diff.generated`).

Without scenario paths, `--generate N` draws N scenarios the real side can play, plays each in
agentsim and in workerd, and writes each disagreement no row of `docs/divergences.md` allows,
shrunk, into `--out` (default `agentsim-diff-generate/`), with the command that replays it.
Progress goes to stderr as generate's does (`scenarios.cli.progress.HuntProgress`). Exit 0 when
every played scenario agrees, 1 on a difference or an unstable play, 2 on bad input or when the
real side cannot run here.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.cli.generate_command import area_list
from scenarios.cli.inputs import non_negative, positive
from scenarios.cli.progress import HuntProgress, is_terminal
from scenarios.generate.strategy import AREAS

__all__ = ["DIFF_GENERATE_DIR", "add_diff_generate_flags", "diff_generate_command"]

DIFF_GENERATE_DIR = "agentsim-diff-generate"
SHRINK_ROUNDS = 3
"""The default of `--shrink-rounds` (`scenarios.diff.generated.SHRINK_ROUNDS`; kept here so the
parser does not load the differential stage)."""


def add_diff_generate_flags(parser: Any) -> None:
    """`diff`'s flags of the generated hunt."""
    parser.add_argument(
        "--generate",
        type=positive,
        metavar="N",
        help="draw N scenarios the real side can play instead of reading PATHs",
    )
    parser.add_argument("--seed", type=non_negative, default=0, help="with --generate: seed (0)")
    parser.add_argument(
        "--areas",
        type=area_list,
        default=tuple(AREAS),
        metavar="AREAS",
        help=f"with --generate: of {','.join(AREAS)} (default: all)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=DIFF_GENERATE_DIR,
        help=f"with --generate: where shrunk findings go ({DIFF_GENERATE_DIR})",
    )
    parser.add_argument(
        "--shrink-rounds",
        type=non_negative,
        default=SHRINK_ROUNDS,
        metavar="K",
        help=f"with --generate: vitest runs a finding's shrink may take ({SHRINK_ROUNDS})",
    )


def _command_line(args: argparse.Namespace) -> str:
    line = f"agentsim diff --generate {args.generate} --seed {args.seed}"
    if tuple(args.areas) != tuple(AREAS):
        line += f" --areas {','.join(args.areas)}"
    if args.sdk is not None:
        line += f" --sdk {args.sdk}"
    return line


def diff_generate_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run `agentsim diff --generate`; the exit code."""
    from scenarios.diff.generated import diff_generated  # the differential stage, loaded here
    from scenarios.diff.workerd import RealSideUnavailable, missing_reason, play_plans, project_for

    reason = missing_reason()
    if reason is not None:
        print(f"agentsim diff: cannot run the real side: {reason}", file=err)
        return 2
    found = [0]
    shown = HuntProgress(
        out, err, "diff --generate", None, lambda: found[0], terminal=is_terminal(out)
    )
    # Without --sdk the drawn scenarios run on the default release: the real side plays it too.
    project = project_for(DEFAULT_RELEASE if args.sdk is None else args.sdk)

    def step(label: str) -> None:
        if label.startswith("shrank"):
            found[0] += 1
        if label.startswith(("playing", "shrink round")) and not shown.shows_bar:
            print(f"diff --generate: {label}", file=err, flush=True)
        shown.advance(label)

    try:
        with shown:
            outcome = diff_generated(
                examples=args.generate,
                seed=args.seed,
                areas=args.areas,
                out_dir=args.out,
                repeat=args.repeat,
                shrink_rounds=args.shrink_rounds,
                play=lambda plans: play_plans(plans, project),
                command=_command_line(args),
                on_step=step,
                # A release agentsim models runs the drawn scenarios on it too; another npm
                # version plays against the default release (where upstream moved).
                sdk=args.sdk if args.sdk in RELEASES else None,
            )
    except RealSideUnavailable as exc:
        print(f"agentsim diff: cannot run the real side: {exc}", file=err)
        return 2
    print(outcome.report(), file=out)
    return 1 if outcome.found else 0
