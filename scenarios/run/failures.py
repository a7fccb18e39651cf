"""Failure files: a failed run written down as JSON so that `agentsim replay FILE` can re-run it
and say whether it reproduced.

Every failing run writes one (`agentsim-failures/NAME-SEED.json` unless `--failures DIR` says
otherwise); `run --trace DIR` writes the same record beside each trace (`NAME-SEED.run.json`,
passed or not) so that `agentsim report --html` knows the verdict. The format, version 1:

    {
      "format": "agentsim-run/1",
      "agentsim_version": "0.1.0",
      "scenario": "idle-eviction",
      "path": "scenarios/library/idle-eviction.yaml",       (as given to agentsim)
      "abs_path": "/home/me/project/scenarios/library/idle-eviction.yaml",
      "scenario_sha256": "…",                                 (of the file's bytes)
      "seed": 7,
      "invariants": [],                                       (checked beyond the file's own)
      "check_determinism": false,                             (true: the run ran twice)
      "determinism_in_subprocess": false,                     (the second in a child process)
      "passed": false,
      "kind": "failed",                       ("failed", or "nondeterministic")
      "failures": ["scenarios/library/idle-eviction.yaml:41: expect 4 (state): …"],
      "failure_values": [{"kind": "expectation", "line": 41, "number": 4, …}],
                                              (each failure's fields: scenarios.run.failure)
      "digest": "…",                                          (sha256 of the trace)
      "events": 11,
      "replay": "agentsim run scenarios/library/idle-eviction.yaml --seed 7"
    }

`replay_file(path)` re-runs a record (with its seed, invariants and determinism check) and
`report_of_trace` gives `reports` a trace's verdict from the record beside it. A replay
reproduces when the run fails again with the same failure sentences and the same trace digest.
Anything else is said loudly and is not a pass (as Hypothesis's `Flaky`): a run that passes
now, or fails differently, means the failure depended on something outside the scenario, the
seed and the code, or that one of those changed since.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from reports import RunReport
from scenarios.language.errors import InvalidScenario
from scenarios.language.loader import MAX_FILE_BYTES, load_scenario, read_document
from scenarios.language.schema import Scenario
from scenarios.run.determinism import run_checked
from scenarios.run.failure import NONDETERMINISM, Failure
from scenarios.run.runner import ScenarioResult, run_scenario

__all__ = [
    "FORMAT",
    "RunRecord",
    "agentsim_version",
    "failure_file_name",
    "file_sha256",
    "read_run_record",
    "replay_file",
    "replay_verdict",
    "report_of_trace",
]

FORMAT = "agentsim-run/1"
KINDS = ("passed", "failed", "nondeterministic")


def agentsim_version() -> str:
    """The installed distribution's version, or the checkout's `pyproject.toml` one."""
    try:
        return metadata.version("agentsim")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"])
        except (OSError, KeyError, ValueError):
            return "unknown"


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes; '' when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def failure_file_name(name: str, seed: int, suffix: str = ".json") -> str:
    return f"{name}-{seed}{suffix}"


@dataclass(frozen=True)
class RunRecord:
    """One run written down: enough to re-run it and to tell whether the re-run matches."""

    scenario: str
    path: str
    seed: int
    passed: bool
    kind: str
    failures: tuple[str, ...]
    digest: str
    events: int
    replay: str
    invariants: tuple[str, ...] = ()
    failure_values: tuple[dict[str, Any], ...] = ()
    """Each failure's fields (`Failure.fields`), in the order of `failures`; empty in a file an
    older agentsim wrote."""
    check_determinism: bool = False
    determinism_in_subprocess: bool = False
    abs_path: str = ""
    scenario_sha256: str = ""
    agentsim_version: str = field(default_factory=agentsim_version)
    format: str = FORMAT

    @classmethod
    def of(
        cls,
        result: ScenarioResult,
        *,
        check_determinism: bool = False,
        in_subprocess: bool = False,
    ) -> RunRecord:
        nondeterministic = any(f.kind == NONDETERMINISM for f in result.failures)
        kind = "passed" if result.passed else "nondeterministic" if nondeterministic else "failed"
        return cls(
            scenario=result.name,
            path=result.path,
            seed=result.seed,
            passed=result.passed,
            kind=kind,
            failures=tuple(f.text for f in result.failures),
            failure_values=tuple(f.fields() for f in result.failures),
            digest=result.digest,
            events=result.events,
            replay=result.replay,
            invariants=tuple(result.invariants),
            check_determinism=check_determinism or in_subprocess,
            determinism_in_subprocess=in_subprocess,
            abs_path=str(Path(result.path).resolve()) if Path(result.path).exists() else "",
            scenario_sha256=file_sha256(result.path),
        )

    def to_json(self) -> str:
        data = asdict(self)
        ordered = {key: data[key] for key in _KEY_ORDER}
        return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    def failure_objects(self) -> tuple[Failure, ...]:
        """The recorded failures as values (empty for a file without `failure_values`)."""
        return tuple(Failure.from_fields(values) for values in self.failure_values)

    def scenario_file(self) -> str:
        """The scenario as it can be opened from here: the path as given, else the absolute one
        recorded when it was written ('' when neither exists)."""
        for candidate in (self.path, self.abs_path):
            if candidate and Path(candidate).is_file():
                return candidate
        return ""


_KEY_ORDER = (
    "format",
    "agentsim_version",
    "scenario",
    "path",
    "abs_path",
    "scenario_sha256",
    "seed",
    "invariants",
    "check_determinism",
    "determinism_in_subprocess",
    "passed",
    "kind",
    "failures",
    "failure_values",
    "digest",
    "events",
    "replay",
)
_TYPES: dict[str, Any] = {
    "format": str,
    "agentsim_version": str,
    "scenario": str,
    "path": str,
    "abs_path": str,
    "scenario_sha256": str,
    "seed": int,
    "invariants": list,
    "check_determinism": bool,
    "determinism_in_subprocess": bool,
    "passed": bool,
    "kind": str,
    "failures": list,
    "failure_values": list,
    "digest": str,
    "events": int,
    "replay": str,
}
_REQUIRED = ("format", "scenario", "path", "seed", "failures", "digest")


def read_run_record(path: str | Path) -> RunRecord:
    """The record in a failure file; a ValueError naming the file and what is wrong otherwise."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}:{exc.lineno}: not JSON ({exc.msg}); a failure file is the JSON object "
            f"agentsim run writes into agentsim-failures/"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, expected an object")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise ValueError(
            f"{path}: not a failure file: no {missing} key(s); expected the keys "
            f"{list(_KEY_ORDER)} as agentsim run writes them"
        )
    if data["format"] != FORMAT:
        raise ValueError(
            f"{path}: format {data['format']!r} is not {FORMAT!r}; this agentsim reads only "
            f"failure files of format {FORMAT!r}"
        )
    for key, wanted in _TYPES.items():
        if key in data and (
            not isinstance(data[key], wanted) or (wanted is int and isinstance(data[key], bool))
        ):
            raise ValueError(f"{path}: {key!r} must be {wanted.__name__}, got {data[key]!r}")
    if data.get("kind", "failed") not in KINDS:
        raise ValueError(f"{path}: kind {data['kind']!r}; allowed: {list(KINDS)}")
    values = {key: data[key] for key in _KEY_ORDER if key in data}
    values["failures"] = tuple(str(f) for f in values["failures"])
    values["failure_values"] = tuple(
        dict(v) for v in values.get("failure_values", ()) if isinstance(v, dict)
    )
    values["invariants"] = tuple(str(name) for name in values.get("invariants", ()))
    values.setdefault("passed", False)
    values.setdefault("kind", "failed")
    values.setdefault("events", 0)
    values.setdefault("replay", "")
    return RunRecord(**values)


def _first_difference(recorded: Sequence[str], now: Sequence[str]) -> str:
    for index, (before, after) in enumerate(zip(recorded, now, strict=False), start=1):
        if before != after:
            return f"failure {index} was: {before}\n    now: {after}"
    if len(recorded) > len(now):
        return f"failure {len(now) + 1} is gone: {recorded[len(now)]}"
    return f"failure {len(recorded) + 1} is new: {now[len(recorded)]}"


def replay_verdict(record: RunRecord, result: ScenarioResult) -> tuple[bool, list[str]]:
    """Whether `result` reproduces the recorded failure, and the lines that say so. A recorded
    nondeterminism reproduces when the runs diverge again, wherever they do."""
    if record.kind == "nondeterministic":
        found = [f for f in result.failures if f.kind == NONDETERMINISM]
        if found:
            return True, [
                f"REPRODUCED {record.scenario} seed={record.seed}: the runs diverge again: "
                f"{found[0]}"
            ]
        return False, [
            f"DID NOT REPRODUCE {record.scenario} seed={record.seed}: the two runs gave the "
            f"same trace this time (digest {result.digest[:12]}).",
            "  This is not a pass: a nondeterminism that comes and goes is still one.",
        ]
    same_failures = tuple(result.failures) == tuple(record.failures)
    same_digest = result.digest == record.digest
    recorded = f"recorded digest {record.digest[:12]}, {record.events} events"
    now = f"now digest {result.digest[:12]}, {result.events} events"
    if not result.passed and same_failures and same_digest:
        return True, [
            f"REPRODUCED {record.scenario} seed={record.seed}: the same "
            f"{len(record.failures)} failure(s) and the same trace (digest {result.digest[:12]})"
        ]
    if result.passed:
        lines = [
            f"DID NOT REPRODUCE {record.scenario} seed={record.seed}: the run passed now, but "
            f"the failure file says it failed ({recorded}; {now}).",
            "  This is not a pass: the failure depended on something other than the scenario, "
            "the seed and the code (or one of those changed since). Like Hypothesis's Flaky.",
        ]
    elif same_failures:
        lines = [
            f"DID NOT REPRODUCE {record.scenario} seed={record.seed} exactly: the same failures, "
            f"but another trace ({recorded}; {now}): the run is not a function of scenario, "
            f"seed and code, or one of those changed since."
        ]
    else:
        lines = [
            f"DID NOT REPRODUCE {record.scenario} seed={record.seed}: it failed differently "
            f"({recorded}; {now})",
            f"  {_first_difference(record.failures, result.failures)}",
        ]
    return False, lines


def replay_file(path: str | Path, sdk: str | None = None) -> tuple[int, list[str]]:
    """Re-run the run recorded in a failure file: the exit code (0 only for a recorded pass
    that passed again identically) and the lines to print. `sdk`: the release the recorded run
    was made on when not its file's (the `--sdk` of its replay command). Bad input (an
    unreadable record, a scenario that is gone or invalid) is a ValueError or
    `InvalidScenario`."""
    record = read_run_record(path)
    scenario_file = record.scenario_file()
    if not scenario_file:
        raise ValueError(
            f"{path}: its scenario {record.path!r} is gone (nor is {record.abs_path!r} there); "
            f"run agentsim replay from the directory the failure was recorded in"
        )
    scenario = _load_recorded(path, record, scenario_file)
    lines = []
    if record.scenario_sha256 and file_sha256(scenario_file) != record.scenario_sha256:
        lines.append(f"note: {scenario_file} changed since the failure was recorded")
    # Named by the path the failure recorded, so that the sentences compare.
    scenario = dataclasses.replace(scenario, path=record.path).on_release(sdk)
    if record.check_determinism:
        result = run_checked(
            scenario,
            record.seed,
            invariants=record.invariants,
            in_subprocess=record.determinism_in_subprocess,
        )
    else:
        result = run_scenario(scenario, record.seed, invariants=record.invariants)
    lines.append(result.report())
    if record.passed:
        same = result.passed and result.digest == record.digest
        lines.append(
            f"{'REPRODUCED' if same else 'DID NOT REPRODUCE'} {record.scenario} "
            f"seed={record.seed}: recorded as passed with digest {record.digest[:12]}; now "
            f"{'passed' if result.passed else 'failed'} with digest {result.digest[:12]}"
        )
        return (0 if same else 1), lines
    lines += replay_verdict(record, result)[1]
    return 1, lines


def _load_recorded(path: str | Path, record: RunRecord, scenario_file: str) -> Scenario:
    """The scenario a failure file names. A failure file is input like any other: when its
    `path` names a file that is not a scenario (`/etc/passwd`), the error says so and quotes
    nothing of that file; the loader's own error, which may quote a line, is only shown for a
    file that is the recorded scenario or reads as one."""
    try:
        return load_scenario(scenario_file)
    except InvalidScenario:
        if _reads_as_scenario(record, scenario_file):
            raise
    raise ValueError(
        f"{path}: its scenario {scenario_file!r} is not a scenario file (not a YAML mapping "
        f"with name: and steps:); a failure file names the scenario agentsim run ran. If it "
        f"is yours, agentsim validate {scenario_file} says what is wrong with it"
    ) from None


def _reads_as_scenario(record: RunRecord, scenario_file: str) -> bool:
    if record.scenario_sha256 and file_sha256(scenario_file) == record.scenario_sha256:
        return True
    try:
        with open(scenario_file, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            return False
        document = read_document(data.decode("utf-8"), scenario_file)
    except (OSError, UnicodeDecodeError, InvalidScenario):
        return False
    return isinstance(document, dict) and "name" in document and "steps" in document


def report_of_trace(
    path: str, records: list[dict[str, Any]], notes: Sequence[str] = ()
) -> RunReport:
    """What `reports` needs for a trace file: the verdict from the run record beside it
    (`NAME-SEED.run.json`, which `run --trace` writes); without one, the page says the verdict
    is unknown rather than guessing. `notes`: what the page says about the file itself."""
    stem = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    sidecar = Path(f"{stem}.run.json")
    if sidecar.is_file():
        record = read_run_record(sidecar)
        return RunReport.from_records(
            name=record.scenario,
            path=record.path,
            seed=record.seed,
            passed=record.passed,
            failures=record.failures,
            replay_command=record.replay,
            records=records,
            description=_description(record.path),
            notes=notes,
        )
    start = next((r for r in records if r.get("event") == "simulation:start"), {})
    raw_seed = start.get("seed")
    seed = raw_seed if isinstance(raw_seed, int) else 0
    return RunReport.from_records(
        name=Path(path).stem,
        path=path,
        seed=seed,
        passed=False,
        failures=[
            f"verdict unknown: no run record beside the trace ({sidecar.name}, as agentsim run "
            f"--trace writes it); this page shows the trace only"
        ],
        replay_command=f"agentsim report {path}",
        records=records,
        verdict_known=False,
        notes=notes,
    )


def _description(scenario_path: str) -> str:
    """The `description:` of a scenario file, read as plain YAML (its classes are not
    imported to show a report); '' when the file is gone or has none."""
    try:
        document = yaml.safe_load(Path(scenario_path).read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return ""
    value = document.get("description") if isinstance(document, dict) else None
    return value if isinstance(value, str) else ""
