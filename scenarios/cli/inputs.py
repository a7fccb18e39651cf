"""What the `agentsim` command accepts: argument types, budget flags and paths that are files.

Every argument type raises `argparse.ArgumentTypeError` with one sentence saying what was
expected, and every whole-number flag says its own minimum. `add_budget_flags` gives `run`,
`fuzz` and `explore` the `--max-*` flags of the run budgets (`sim.budget`), and `budget_flags`
reads them back as `scenarios.run.runner.budget_overrides` arguments. `input_file` tells apart the
ways a path can fail to be a file to read (missing, a symbolic-link loop, no permission, a
directory, a FIFO or a device, which would block or never end), so that each is reported as
what it is rather than as "no such file". `expand_paths` turns the paths given into scenario
files, and the `write_*` and `output_*` helpers create what a command writes; each raises
`PathProblem`, which the command reports as bad input (exit 2).
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shlex
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agents_core.releases.registry import DEFAULT_RELEASE, RELEASES
from scenarios.language.releases import release_flag_problem
from sim.budget import BUDGET_NAMES
from sim.trace import Trace
from sim.units import parse_duration_ms

__all__ = [
    "MAX_SEEDS",
    "OUTPUT_FOLDERS",
    "PathProblem",
    "add_budget_flags",
    "add_sdk_flag",
    "budget_flags",
    "budgets_in_command",
    "expand_paths",
    "input_file",
    "library_dir",
    "non_negative",
    "output_directory",
    "output_file",
    "path_problem",
    "positive",
    "release_name",
    "scenario_files_in",
    "sdk_in_command",
    "seed_range",
    "skipped_note",
    "write_text",
    "write_trace",
    "writable",
    "write_whole",
]

MAX_SEEDS = 1_000_000
_SEED_RANGE = re.compile(r"(\d+)\.\.(\d+)")


class PathProblem(ValueError):
    """A path given on the command line that cannot be read as a file."""


# -- numbers ------------------------------------------------------------------------------------
def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
    return value


def non_negative(text: str) -> int:
    """A whole number >= 0 (a seed, a count that may be zero)."""
    return _whole(text, 0)


def positive(text: str) -> int:
    """A whole number >= 1; any other input says so, whatever it is (-5, 0, 'x')."""
    return _whole(text, 1)


def release_name(text: str) -> str:
    """An SDK release agentsim models (`--sdk 0.32.0`); any other says which there are."""
    problem = release_flag_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_sdk_flag(parser: argparse.ArgumentParser, what: str = "the scenarios") -> None:
    """`--sdk VERSION`: the SDK release the runs start on, over a file's `sdk:` key."""
    parser.add_argument(
        "--sdk",
        type=release_name,
        metavar="VERSION",
        help=f"run {what} on this SDK release ({', '.join(RELEASES)}; default: a file's sdk: "
        f"key, else {DEFAULT_RELEASE}); it overrides the file's key",
    )


def sdk_in_command(command: str) -> str | None:
    """The `--sdk` of a recorded replay command (None: it names none, or an unknown one)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--sdk")
    try:
        known, _ = parser.parse_known_args(shlex.split(command))
    except (ValueError, SystemExit):
        return None
    sdk = known.sdk
    return sdk if isinstance(sdk, str) and release_flag_problem(sdk) is None else None


def seed_range(text: str) -> list[int]:
    match = _SEED_RANGE.fullmatch(text.strip())
    low, high = (int(match.group(1)), int(match.group(2))) if match else (1, 0)
    if low > high or high - low >= MAX_SEEDS:
        raise argparse.ArgumentTypeError(
            f"expected A..B, whole numbers with A <= B (both included, at most {MAX_SEEDS} "
            f"seeds), e.g. 0..99; got {text!r}"
        )
    return list(range(low, high + 1))


def _seconds_at_least(least_ms: int, least: str, examples: str) -> Callable[[str], float]:
    """An argparse type: a duration of at least `least_ms`, in seconds."""

    def seconds(text: str) -> float:
        try:
            ms = parse_duration_ms(text)
        except ValueError:
            ms = -1
        if ms < least_ms:
            raise argparse.ArgumentTypeError(
                f"expected a duration of at least {least}, such as {examples}, got {text!r}"
            )
        return ms / 1000

    return seconds


_wall_clock = _seconds_at_least(1_000, "1s", "30s or 5m")
_turn = _seconds_at_least(10, "10ms", "500ms or 5s")


# -- budgets ------------------------------------------------------------------------------------
def add_budget_flags(parser: argparse.ArgumentParser) -> None:
    """`--max-events`, `--max-records`, `--max-wall-clock`, `--max-memory-mb`,
    `--max-events-per-second`, `--max-turn`: each run's budgets, over the defaults and the
    file's `limits:`."""
    group = parser.add_argument_group(
        "run budgets",
        "a run that uses one up is stopped and fails; events and records are deterministic, "
        "wall clock and memory depend on the machine (a last-resort guard)",
    )
    group.add_argument(
        "--max-events", type=positive, metavar="N", help="simulated events per run (100000)"
    )
    group.add_argument(
        "--max-records", type=positive, metavar="N", help="trace records per run (100000)"
    )
    group.add_argument(
        "--max-wall-clock",
        type=_wall_clock,
        metavar="DURATION",
        help="wall-clock time per run (2m)",
    )
    group.add_argument(
        "--max-memory-mb",
        type=lambda text: _whole(text, 16),
        metavar="MB",
        help="memory growth per run (1024)",
    )
    group.add_argument(
        "--max-events-per-second",
        type=lambda text: _whole(text, 1),
        metavar="N",
        help="simulated events per simulated second before a run counts as spinning (2000)",
    )
    group.add_argument(
        "--max-turn",
        type=_turn,
        metavar="DURATION",
        help="real time one stretch of agent code between two awaits may take (5s)",
    )


def budget_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The budget flags given, as `budget_overrides` keyword arguments (absent ones None)."""
    flags = {
        "events": "max_events",
        "records": "max_records",
        "wall_s": "max_wall_clock",
        "memory_mb": "max_memory_mb",
        "events_per_second": "max_events_per_second",
        "turn_s": "max_turn",
    }
    assert set(flags) == set(BUDGET_NAMES)
    return {key: getattr(args, attribute, None) for key, attribute in flags.items()}


def budgets_in_command(command: str) -> dict[str, Any]:
    """The budget flags of a recorded replay command (`agentsim run x.yaml --seed 3
    --max-events 2000`), as `budget_overrides` keyword arguments: what `agentsim replay` of a
    failure file runs under, so that a run a flag stopped is stopped again."""
    parser = argparse.ArgumentParser(add_help=False)
    add_budget_flags(parser)
    try:
        words = shlex.split(command)
        known, _ = parser.parse_known_args(words)
    except (ValueError, SystemExit):
        return {}
    return budget_flags(known)


# -- paths --------------------------------------------------------------------------------------
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe): reading it would wait for a writer"),
    (stat.S_ISCHR, "a character device: reading it might never end"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def path_problem(path: str | Path) -> str | None:
    """Why `path` cannot be read as a regular file (None when it can: it may still be a
    directory, which callers handle)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (the link points back at itself)"
        if exc.errno == errno.ENOENT:
            if os.path.islink(path):
                return "a broken symbolic link (its target does not exist)"
            return "no such file or directory"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied"
        if exc.errno == errno.ENAMETOOLONG:
            return "the file name is too long"
        return exc.strerror or str(exc)
    for test, what in _KINDS:
        if test(info.st_mode):
            return f"not a regular file: it is {what}"
    return None


def input_file(path: str, what: str = "file") -> Path:
    """`path`, checked to be a regular file; `PathProblem` naming what is wrong otherwise."""
    problem = path_problem(path)
    if problem is None and Path(path).is_dir():
        problem = f"a directory; expected a {what}"
    if problem is not None:
        raise PathProblem(f"{path!r}: {problem}")
    return Path(path)


def output_file(path: str, what: str, example: str) -> None:
    """A path a file will be written to at the end: refuse at once what cannot be one (a
    directory), before any run spends its time."""
    if Path(path).is_dir():
        raise PathProblem(
            f"{path!r} is a directory; the {what} is one file (give a name such as "
            f"{os.path.join(path, example)!r})"
        )


def writable(given: str, flag: str, *, directory: bool) -> None:
    """Refuse, before any run spends its time, a path `flag` names that cannot be written: a
    file (or, `directory`, a folder) that exists and is not writable or not of its kind, or one
    whose nearest existing parent is a file or a folder that takes no new entry (tried with a
    probe file, removed at once: permission bits do not say what a read-only mount or root's
    rights allow). Creates nothing that stays."""
    target = Path(given)
    why = ""
    if target.exists():
        if directory and not target.is_dir():
            why = "it is a file, not a directory"
        elif not directory and target.is_dir():
            why = "it is a directory, and this writes one file"
        elif not directory:
            try:
                with target.open("a", encoding="utf-8"):
                    pass
            except OSError as exc:
                why = f"it cannot be opened for writing ({exc.strerror or exc})"
        else:
            why = _probe(target)
    else:
        parent = target.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            why = f"{str(parent)!r} is a file, not a directory"
        else:
            why = _probe(parent)
    if why:
        raise PathProblem(f"{flag} {given!r} cannot be written: {why}")


def _probe(directory: Path) -> str:
    """Why no file can be created in `directory` (nothing when one can)."""
    try:
        handle, name = tempfile.mkstemp(prefix=".agentsim-probe-", dir=directory)
    except OSError as exc:
        return f"{str(directory)!r} takes no new file ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(name)
    return ""


def library_dir() -> Path:
    """The bundled scenarios: `scenarios/library` inside the installed package (a wheel ships
    its `*.yaml` and `*.golden` files as package data)."""
    return Path(__file__).resolve().parents[1] / "library"


SCENARIO_SUFFIXES = (".yaml", ".yml")
"""What a file found in a directory must end with to count as a scenario."""


OUTPUT_FOLDERS = ("agentsim-explore", "agentsim-failures", "agentsim-fuzz", "agentsim-repro")
"""The folders agentsim writes into by default: reproducers (which fail on purpose) and failure
files. A directory walk leaves them out; a file in one, or the folder itself, named on the
command line is run."""


def scenario_files_in(directory: Path, skipped: list[Path] | None = None) -> list[Path]:
    """The `*.yaml` and `*.yml` files under `directory`, at any depth, sorted by their path
    below it (a folder's files in name order, a subfolder's where its name sorts). Hidden
    files and folders (`.git`, `.venv`) are left out, and so are agentsim's own output folders
    below it (`OUTPUT_FOLDERS`): the files found in those are added to `skipped`."""
    found = []
    for path in directory.rglob("*"):
        relative = path.relative_to(directory)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.suffix in SCENARIO_SUFFIXES and path.is_file():
            if any(part in OUTPUT_FOLDERS for part in relative.parts[:-1]):
                if skipped is not None:
                    skipped.append(path)
                continue
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(directory).parts)


def expand_paths(paths: Sequence[str], skipped: list[Path] | None = None) -> list[str]:
    """Files in the order given; a directory stands for its `*.yaml` and `*.yml` files at any
    depth (`scenario_files_in`, which adds the files of agentsim's output folders below it to
    `skipped`)."""
    files: list[str] = []
    for given in paths:
        path = Path(given)
        problem = path_problem(given)
        if problem is not None:
            raise PathProblem(f"{given!r}: {problem}")
        if path.is_dir():
            left_out: list[Path] = []
            found = scenario_files_in(path, left_out)
            if skipped is not None:
                skipped += left_out
            if not found:
                raise PathProblem(
                    f"no *.yaml or *.yml scenario files in directory {given!r} (searched "
                    f"with its subdirectories"
                    + (f"; {skipped_note(left_out)}" if left_out else "")
                    + ")"
                )
            files += [str(p) for p in found]
        else:
            files.append(given)
    return list(dict.fromkeys(files))


def skipped_note(skipped: Sequence[Path]) -> str:
    """`skipped 3 files in agentsim's own output folders (...)`: what a walk left out."""
    folders = sorted(
        {
            str(Path(*path.parts[: path.parts.index(part) + 1]))
            for path in skipped
            for part in path.parts[:-1]
            if part in OUTPUT_FOLDERS
        }
    )
    files = f"{len(skipped)} file{'' if len(skipped) == 1 else 's'}"
    return (
        f"skipped {files} in agentsim's own output folders ({', '.join(f + '/' for f in folders)}"
        f": reproducers and failure files, which fail on purpose); name a file or the folder "
        f"itself to run it"
    )


def output_directory(given: str, what: str) -> Path:
    target = Path(given)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PathProblem(f"cannot create the {what} directory {given!r}: {exc.strerror}") from None
    return target


def write_text(path: str | Path, text: str, what: str) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PathProblem(f"cannot write the {what} {str(path)!r}: {exc.strerror or exc}") from None


def write_trace(trace: Trace, path: Path) -> None:
    try:
        trace.write_jsonl(path)
    except OSError as exc:
        raise PathProblem(f"cannot write the trace into {str(path.parent)!r}: {exc}") from None


def write_whole(path: Path, text: str) -> None:
    """Write `path` so that it is never seen half-written (a Ctrl-C in the middle leaves the
    old file or none): into a file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()
