"""The `generate` hunt of one bug: `agentsim generate` with a fixed seed, under a time limit.

Unlike fuzz and explore, generate takes no story: it draws whole scenarios over its own areas
(`schedules`, `fibers`, `tools`, `chat`, `facets`). A bug's zoo areas are mapped onto those from
what the code does (a fiber's keepAlive lease is drawn by the fibers part, a schedule's alarm by
the schedules part, a sub-agent by the facets part); a bug in the platform draws from every
area. One run per bug,
`--examples` drawn from `--seed`, cut at the time limit; generate writes each finding's shrunk
reproducer as it goes (`generate-SEED-N.yaml`), so a run the limit cuts still leaves what it
found. A finding is the bug's when one of its reproducers passes on the clean tree with every
invariant checked (`hunting.clean_tree_passes`), as for the other hunts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from tests.bugzoo.hunting import HuntResult, StoryOutcome, clean_tree_passes, environment

__all__ = ["GENERATE_AREAS", "generate_areas", "hunt_generate"]

GENERATE_AREAS: dict[str, tuple[str, ...]] = {
    "schedules": ("schedules",),
    "alarm": ("schedules",),
    "fibers": ("fibers",),
    "keepalive": ("fibers",),
    "agent_tools": ("tools",),
    "chat": ("chat",),
    "facets": ("facets",),
}
"""Zoo area -> generate's areas; an area not named here (`all`) draws from all."""


def generate_areas(areas: Iterable[str]) -> tuple[str, ...] | None:
    """Generate's areas for a bug's zoo areas, in generate's order; None for all of them."""
    chosen: set[str] = set()
    for area in areas:
        mapped = GENERATE_AREAS.get(area)
        if mapped is None:
            return None
        chosen.update(mapped)
    order = ("schedules", "fibers", "tools", "chat", "facets")
    return tuple(area for area in order if area in chosen)


def _argv(
    areas: tuple[str, ...] | None, examples: int, seed: int, out: Path, sdk: str | None = None
) -> list[str]:
    argv = ["generate", "--examples", str(examples), "--seed", str(seed), "--out", str(out)]
    if areas is not None:
        argv += ["--areas", ",".join(areas)]
    if sdk is not None:
        argv += ["--sdk", sdk]
    return argv


def hunt_generate(
    tree: Path,
    clean: Path,
    bug_areas: Iterable[str],
    *,
    examples: int,
    seed: int,
    limit_s: float,
    sdk: str | None = None,
) -> HuntResult:
    """One `agentsim generate` run in the planted `tree`, at most `limit_s` seconds; with `sdk`,
    its scenarios test that release (each reproducer names the release it starts on, which
    the clean tree's replay keeps)."""
    areas = generate_areas(bug_areas)
    out = tree / "agentsim-generate"
    result = HuntResult("generate", 1, (examples,))
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scenarios.cli", *_argv(areas, examples, seed, out, sdk)],
            cwd=tree,
            env=environment(tree),
            capture_output=True,
            text=True,
            timeout=limit_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        result.timed_out, done = True, None
    result.seconds = time.monotonic() - started
    result.ran = 1
    if done is not None and done.returncode not in (0, 1):
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        result.crashes.append(StoryOutcome("generate", False, result.seconds, crashed=last[0]))
    files = sorted(out.glob("*.yaml"), key=lambda path: path.stat().st_mtime)
    for path in files:
        outcome = StoryOutcome(path.stem, True, result.seconds, reproducers=(str(path),))
        # No `--sdk` on the replay: a reproducer names the release it starts on, and one
        # that starts on an older release and upgrades mid-run must replay that way.
        if clean_tree_passes(clean, tree, outcome):
            result.found_in = outcome
            break
        result.shared.append(outcome)
    return result
