"""Golden traces: the short log of a scenario's run, kept beside it as `NAME.golden`.

A library scenario's verdict says whether its story still holds; its golden trace shows *how*
the run went, one line per trace record (`reports.render_short_log`: sim time, agent,
incarnation, event and its key fields), so that a change in the runtime or the platform that
alters what happens shows up as a readable diff in review even when every expectation still
passes. The run uses the scenario's own seed; the text has no path, wall clock or memory
address in it, so the same code gives the same bytes anywhere.

`check_golden(path)` compares a scenario's run with its golden file; `update_golden(path)`
writes it. Both also say whether the run passed its expectations: the golden trace of a run
whose story no longer holds is not "ok", even when it matches, and `write_golden` still writes
it (the diff is worth reviewing) but reports the failures. The command for people is
`agentsim golden [--update] PATH...`.

Golden traces are kept per release. `NAME.golden` is the run on the release the file gives (its
`sdk:` key, or the default release, 0.32.0); `agentsim golden --sdk 0.21.0` runs it on another
release and keeps that run in `NAME.sdk-0.21.0.golden` beside it.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports import render_short_log
from scenarios.language.loader import load_scenario
from scenarios.run.runner import ScenarioResult, run_scenario

__all__ = [
    "GoldenCheck",
    "check_golden",
    "golden_path",
    "golden_text",
    "update_command",
    "update_golden",
    "write_golden",
]

SUFFIX = ".golden"


def golden_path(scenario_path: str | Path, sdk: str | None = None) -> Path:
    """`library/idle-eviction.yaml` -> `library/idle-eviction.golden`; with `sdk` (a release
    other than the file's own) `library/idle-eviction.sdk-0.21.0.golden`."""
    path = Path(scenario_path)
    if sdk is None:
        return path.with_suffix(SUFFIX)
    return path.with_name(f"{path.stem}.sdk-{sdk}{SUFFIX}")


def update_command(scenario_path: str | Path, sdk: str | None = None) -> str:
    """The command that (re)writes the golden file of a scenario."""
    command = f"agentsim golden --update {shlex.quote(str(scenario_path))}"
    return command if sdk is None else f"{command} --sdk {sdk}"


def _run(scenario_path: str | Path, sdk: str | None) -> tuple[ScenarioResult, Path, str | None]:
    """The run a golden file keeps, its golden file, and the release it is kept for (None: the
    file's own)."""
    scenario = load_scenario(scenario_path).on_release(sdk)
    kept_for = scenario.sdk if scenario.sdk_overridden else None
    return run_scenario(scenario), golden_path(scenario_path, kept_for), kept_for


def golden_text(result: ScenarioResult, sdk: str | None = None) -> str:
    """The golden form of a run: two comment lines, then its short log (trailing spaces cut).
    `sdk`: the release the run was made on, when not the scenario file's own."""
    header = [
        f"# golden trace of scenario {result.name!r}, seed {result.seed}: its short log, one "
        f"line per trace record (reports/README.md)",
        "# after an intended change, regenerate it: agentsim golden --update <the scenario file>",
    ]
    if sdk is not None:
        header[0] += f", on SDK release {sdk} (agentsim golden --sdk {sdk})"
    records = [record.to_dict() for record in result.trace]
    body = [line.rstrip() for line in render_short_log(records).splitlines()]
    return "\n".join([*header, *body]) + "\n"


@dataclass(frozen=True)
class GoldenCheck:
    """How one scenario's run compares with its golden file."""

    scenario: str
    """The scenario file, as given."""
    golden: Path
    status: str
    """`match`, `missing` (no golden file yet) or `differs`; after `write_golden`, `wrote`
    or `unchanged`."""
    diff: str = ""
    """For `differs`: a unified diff from the golden file to this run."""
    failures: tuple[str, ...] = ()
    """The run's failure sentences: its expectations (or liveness) did not hold."""
    replay: str = ""
    """The command that replays the run."""
    sdk: str | None = None
    """The release the golden file is kept for, when not the scenario file's own."""

    @property
    def ok(self) -> bool:
        return self.status in ("match", "wrote", "unchanged") and not self.failures

    def explain(self) -> str:
        """What is wrong and the command that fixes it ('' when all is well)."""
        parts = []
        if self.failures:
            sentences = "".join(f"  - {sentence}\n" for sentence in self.failures)
            parts.append(
                f"the run of {self.scenario} fails its expectations, so its golden trace shows "
                f"a story that no longer holds:\n{sentences}  replay: {self.replay}"
            )
        if self.status == "missing":
            parts.append(
                f"{self.scenario} has no golden trace ({self.golden} does not exist); create "
                f"it with: {update_command(self.scenario, self.sdk)}"
            )
        if self.status == "differs":
            parts.append(
                f"the run of {self.scenario} differs from its golden trace {self.golden}:\n"
                f"{self.diff}"
                f"if the change is intended, update it with: "
                f"{update_command(self.scenario, self.sdk)}"
            )
        return "\n".join(parts)


def check_golden(scenario_path: str | Path, sdk: str | None = None) -> GoldenCheck:
    """Run the scenario with its own seed (on release `sdk`, None: the file's own) and compare
    the short log with its golden file."""
    result, golden, kept_for = _run(scenario_path, sdk)
    actual = golden_text(result, kept_for)
    verdict: dict[str, Any] = {
        "failures": result.failures,
        "replay": result.replay,
        "sdk": kept_for,
    }
    if not golden.is_file():
        return GoldenCheck(str(scenario_path), golden, "missing", **verdict)
    expected = golden.read_text(encoding="utf-8")
    if expected == actual:
        return GoldenCheck(str(scenario_path), golden, "match", **verdict)
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        fromfile=str(golden),
        tofile=f"{scenario_path} (this run)",
    )
    return GoldenCheck(str(scenario_path), golden, "differs", "".join(diff), **verdict)


def write_golden(scenario_path: str | Path, sdk: str | None = None) -> GoldenCheck:
    """Write the golden file of a scenario from a run (on release `sdk`, None: the file's own):
    status `wrote` or `unchanged`, with the run's failures (a failing run's golden file is
    written all the same)."""
    result, golden, kept_for = _run(scenario_path, sdk)
    text = golden_text(result, kept_for)
    verdict: dict[str, Any] = {
        "failures": result.failures,
        "replay": result.replay,
        "sdk": kept_for,
    }
    if golden.is_file() and golden.read_text(encoding="utf-8") == text:
        return GoldenCheck(str(scenario_path), golden, "unchanged", **verdict)
    golden.write_text(text, encoding="utf-8")
    return GoldenCheck(str(scenario_path), golden, "wrote", **verdict)


def update_golden(scenario_path: str | Path) -> tuple[Path, bool]:
    """Write the golden file of a scenario from a run; its path and whether it changed."""
    written = write_golden(scenario_path)
    return written.golden, written.status == "wrote"
