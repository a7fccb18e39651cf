"""The pytest plugin (entry point `pytest11: agentsim`, installed with the package).

Three things for people who test their agents with pytest:

- **The `sim` fixture**: a `Simulation` seeded from `--agentsim-seed N`, or else from the test's
  node id (crc32), so that every test has its own stable seed; closed after the test. When the
  test fails, its report gets an `agentsim` section: the seed, the last lines of the short log,
  where the full trace was written (`<agentsim_failures>/pytest/<test>-<seed>.jsonl`) and the
  line that replays it (`pytest <node id> --agentsim-seed N`). `--agentsim-invariants NAMES`
  (or `all`) checks those invariants (`sim.checkers`) at the end of every test that used the
  fixture, as part of the test.
- **Scenario files as tests**: a `.yaml`/`.yml` file is collected when it has top-level
  `agents:` and `steps:` keys (the scenario format), or when its path matches a glob of the
  `agentsim_scenarios` ini option; `agentsim_sniff_yaml = false` leaves only the globs. Each
  file gives one test per seed (its own, `--agentsim-seed N`, or each of `--agentsim-seeds
  A..B`), run exactly as `agentsim run` runs it: a failure shows the same text, writes the same
  failure file and ends with the same replay command.
- `--agentsim-sdk VERSION` runs the `sim` fixture and every scenario file on that SDK release
  (over a file's `sdk:` key). A release modelled in part gets a note after collection, once,
  saying what of it is not built.
- The options are checked when pytest starts: a bad seed range, invariant name or release is a
  usage error naming what would be valid.

What a hook needs beyond the `scenarios` package itself (the checkers, the short log, the
failure files) is imported when it is first needed. A `sim` fixture of a project's own conftest
wins over this one, as pytest's rules say, and this plugin then leaves those tests alone (no
section, no invariants): what it adds is tied to its own fixture.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from scenarios.language.schema import Scenario
    from scenarios.run.runner import ScenarioResult
    from sim import Simulation

__all__ = ["ScenarioFile", "ScenarioItem", "seed_of"]

DEFAULT_FAILURES_DIR = "agentsim-failures"
SHORT_LOG_LINES = 20
_TOP_LEVEL_KEY = r"^(?:{key}|'{key}'|\"{key}\")\s*:"
_AGENTS = re.compile(_TOP_LEVEL_KEY.format(key="agents"), re.M)
_STEPS = re.compile(_TOP_LEVEL_KEY.format(key="steps"), re.M)
_SNIFF_LIMIT = 10 * 1024 * 1024
"""Files larger than a scenario may be (10 MB) are never read to be sniffed."""


class _Used:
    """What the fixture gave a test: the simulation and its seed, and where the seed came from
    (in a Hypothesis test, the simulation of the example that ran last)."""

    def __init__(self, simulation: Simulation, seed: int, given: bool) -> None:
        self.simulation = simulation
        self.seed = seed
        self.given = given
        self.hypothesis = False


_USED = pytest.StashKey[_Used]()
_INVARIANTS = pytest.StashKey[tuple[str, ...]]()
_SEEDS = pytest.StashKey[tuple[int, ...] | None]()
_SDK = pytest.StashKey[str | None]()


# -- options ------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentsim", "agentsim: deterministic simulation of agents")
    group.addoption(
        "--agentsim-seed",
        type=int,
        default=None,
        metavar="N",
        help="seed of the `sim` fixture for every test (default: from each test's node id), "
        "and of every scenario file's run (default: the file's own)",
    )
    group.addoption(
        "--agentsim-seeds",
        default=None,
        metavar="A..B",
        help="run each collected scenario file with every seed from A to B (both included)",
    )
    group.addoption(
        "--agentsim-sdk",
        default=None,
        metavar="VERSION",
        help="the SDK release of the `sim` fixture and of every scenario file's run (default: "
        "a file's sdk: key, else the default release)",
    )
    group.addoption(
        "--agentsim-invariants",
        default="",
        metavar="NAMES",
        help="check these invariants (comma-separated, or 'all') after every test that used "
        "the `sim` fixture, and in every scenario file's run",
    )
    parser.addini(
        "agentsim_scenarios",
        type="linelist",
        default=[],
        help="globs (relative to the rootdir) of YAML files to collect as scenarios whatever "
        "their keys",
    )
    parser.addini(
        "agentsim_sniff_yaml",
        type="bool",
        default=True,
        help="collect YAML files with top-level agents: and steps: keys as scenarios (true)",
    )
    parser.addini(
        "agentsim_failures",
        default=DEFAULT_FAILURES_DIR,
        help="where failure files and failing tests' traces go (agentsim-failures)",
    )


HYPOTHESIS_PROFILE = "agentsim"
"""The Hypothesis profile the plugin loads when the project chose none (see `_simulated_time`)."""


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    _simulated_time(config)
    _agentsim_options(config)


def _simulated_time(config: pytest.Config) -> None:
    """Hypothesis times each example by the wall clock (a 200 ms deadline, a health check on
    slow data). An example that runs a simulation is judged by simulated time, and how long it
    takes on the wall depends on the machine's load alone: under the defaults the same test
    passes on an idle machine and fails on a busy one. So when the project loaded no profile of
    its own (by `--hypothesis-profile` or `settings.load_profile`), the plugin loads one that
    drops the deadline and the `too_slow` health check; a test's own `@settings` still wins."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return
    if config.getoption("--hypothesis-profile", None):
        return
    if settings.get_current_profile_name() != "default":
        return  # the project loaded a profile of its own (or Hypothesis its "ci" one)
    settings.register_profile(
        HYPOTHESIS_PROFILE,
        parent=settings.get_profile("default"),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile(HYPOTHESIS_PROFILE)


def _agentsim_options(config: pytest.Config) -> None:
    names = config.getoption("agentsim_invariants") or ""
    invariants: tuple[str, ...] = ()
    if names.strip():
        from scenarios.run.runner import invariant_names

        try:
            invariants = invariant_names(names)
        except ValueError as exc:
            raise pytest.UsageError(f"--agentsim-invariants: {exc}") from None
    config.stash[_INVARIANTS] = invariants
    seeds_text = config.getoption("agentsim_seeds")
    seeds: tuple[int, ...] | None = None
    if seeds_text is not None:
        import argparse

        from scenarios.cli.inputs import seed_range

        try:
            seeds = tuple(seed_range(seeds_text))
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"--agentsim-seeds: {exc}") from None
    config.stash[_SEEDS] = seeds
    sdk = config.getoption("agentsim_sdk")
    if sdk is not None:
        from scenarios.language.releases import release_flag_problem

        problem = release_flag_problem(sdk)
        if problem is not None:
            raise pytest.UsageError(f"--agentsim-sdk: {problem}")
    config.stash[_SDK] = sdk
    seed = config.getoption("agentsim_seed")
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--agentsim-seed: expected a whole number >= 0, got {seed}")


def seed_of(nodeid: str) -> int:
    """The stable seed of a test without `--agentsim-seed`: crc32 of its node id."""
    return zlib.crc32(nodeid.encode("utf-8"))


def _failures_dir(config: pytest.Config) -> Path:
    given = Path(str(config.getini("agentsim_failures") or DEFAULT_FAILURES_DIR))
    return given if given.is_absolute() else Path(config.invocation_params.dir) / given


# -- the `sim` fixture --------------------------------------------------------------------------
@pytest.fixture(name="sim")
def _sim_fixture(request: pytest.FixtureRequest) -> Iterator[Simulation]:
    """A `Simulation` seeded from `--agentsim-seed N` or the test's node id; closed after it."""
    from sim import Simulation

    given = request.config.getoption("agentsim_seed")
    seed = given if given is not None else seed_of(request.node.nodeid)
    simulation = Simulation(seed=seed, sdk=request.config.stash.get(_SDK, None))
    used = request.node.stash[_USED] = _Used(simulation, seed, given is not None)
    try:
        yield simulation
    finally:
        simulation.close()
        used.simulation.close()  # a Hypothesis test's last example's (closing twice is fine)


def _ours(item: pytest.Item) -> _Used | None:
    """What our fixture gave `item`, or None (a conftest's own `sim` fixture is not ours)."""
    return item.stash.get(_USED, None)


def _replay_line(item: pytest.Item, seed: int) -> str:
    invariants = item.config.stash.get(_INVARIANTS, ())
    line = f"pytest {_quoted(item.nodeid)} --agentsim-seed {seed}"
    hypothesis_seed = _hypothesis_seed(item)
    if hypothesis_seed is not None:
        line += f" --hypothesis-seed {hypothesis_seed}"
    if invariants:
        from sim.checkers import CHECKERS

        names = "all" if set(invariants) == set(CHECKERS) else ",".join(invariants)
        line += f" --agentsim-invariants {names}"
    sdk = item.config.stash.get(_SDK, None)
    if sdk is not None:
        line += f" --agentsim-sdk {sdk}"
    return line


def _hypothesis_seed(item: pytest.Item) -> str | None:
    """`--hypothesis-seed` as given to this run (None without it, or without Hypothesis)."""
    try:
        given = item.config.getoption("hypothesis_seed")
    except ValueError:
        return None
    return None if given is None else str(given)


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    used = _ours(item)
    if used is not None:
        _fresh_sim_per_example(item, used)
    outcome = yield
    invariants = item.config.stash.get(_INVARIANTS, ())
    if used is not None and invariants:
        from sim.checkers import assert_invariants

        assert_invariants(
            used.simulation,
            invariants,
            scenario=item.nodeid,
            replay=_replay_line(item, used.seed),
        )
    return outcome


def _fresh_sim_per_example(item: pytest.Item, used: _Used) -> None:
    """In a Hypothesis test, give each example a `Simulation` of its own, with the fixture's
    seed: examples then do not share state, and the failing one replays from the seed and
    Hypothesis's choices alone. It wraps `inner_test`, the hook Hypothesis offers for running
    each example differently, and tells Hypothesis the fixture is reset per example (its
    function-scoped-fixture health check would say otherwise)."""
    test = getattr(item, "obj", None)
    handle = getattr(test, "hypothesis", None)
    if handle is None or not hasattr(handle, "inner_test"):
        return
    from hypothesis import HealthCheck
    from hypothesis import settings as Settings

    from scenarios.hunt.explanations import hide_agentsim
    from sim import Simulation

    hide_agentsim()  # its explanations name the user's lines, as under sim.strategies
    used.hypothesis = True
    inner = handle.inner_test
    fixture_sim = used.simulation

    @functools.wraps(inner)
    def each_example(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # the failure's traceback starts in the user's test
        if kwargs.get("sim") is fixture_sim:
            if used.simulation is not fixture_sim:
                used.simulation.close()
            sdk = item.config.stash.get(_SDK, None)
            used.simulation = kwargs["sim"] = Simulation(seed=used.seed, sdk=sdk)
        return inner(*args, **kwargs)

    handle.inner_test = each_example
    function: Any = getattr(test, "__func__", test)
    chosen = getattr(function, "_hypothesis_internal_use_settings", None)
    if chosen is not None:
        function._hypothesis_internal_use_settings = Settings(
            chosen,
            suppress_health_check={HealthCheck.function_scoped_fixture}
            | set(chosen.suppress_health_check),
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    used = _ours(item)
    if used is not None and report.failed and call.when == "call":
        error = call.excinfo.value if call.excinfo is not None else None
        report.sections.append(("agentsim", _failure_section(item, used, error)))
    return report


def _failure_section(item: pytest.Item, used: _Used, error: BaseException | None = None) -> str:
    from reports.shortlog import failure_view

    records = [record.to_dict() for record in used.simulation.trace]
    where = "--agentsim-seed" if used.given else "the test's node id"
    lines = [f"seed: {used.seed} (from {where})"]
    # The lines that matter: heartbeats folded, and the records an invariant violation names,
    # deploys, evictions and faults kept even when they fall before the window.
    named = {seq for violation in getattr(error, "violations", ()) for seq in violation.seqs}
    view = failure_view(records, SHORT_LOG_LINES, keep=named)
    if view.earlier:
        lines.append("earlier records that matter (deploys, evictions, faults, those named):")
        lines += [f"  {line}" for line in view.earlier]
    folded = (
        f"; {view.heartbeats_folded} keepAlive heartbeats folded" if view.heartbeats_folded else ""
    )
    lines.append(
        f"short log, last {len(view.lines)} lines ({view.records_shown} of {len(records)} "
        f"records{folded}):"
    )
    lines += [f"  {line}" for line in view.lines]
    target = _failures_dir(item.config) / "pytest" / f"{_file_stem(item.nodeid)}-{used.seed}.jsonl"
    try:
        used.simulation.trace.write_jsonl(target)
        where_to = _shown_path(item.config, target)
        lines.append(f"full trace: {where_to} (read it: agentsim report {_quoted(where_to)})")
    except OSError as exc:
        lines.append(f"full trace: not written ({exc.strerror or exc})")
    lines.append(f"replay: {_replay_line(item, used.seed)}")
    if used.hypothesis:
        lines.append(
            "(each Hypothesis example ran on a fresh Simulation with this seed, and this is the "
            "log of the last one, the shrunk failing example; Hypothesis's database replays it "
            "first, and --hypothesis-seed N draws the same examples again on any machine)"
        )
    return "\n".join(lines)


def _file_stem(nodeid: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")
    return stem[-150:] or "test"


# -- scenario files as tests --------------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    config = parent.config
    if _matches_glob(config, file_path) or (
        config.getini("agentsim_sniff_yaml") and looks_like_scenario(file_path)
    ):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def _matches_glob(config: pytest.Config, path: Path) -> bool:
    globs = config.getini("agentsim_scenarios")
    if not globs:
        return False
    try:
        relative = path.resolve().relative_to(Path(config.rootpath).resolve()).as_posix()
    except ValueError:
        relative = path.as_posix()
    return any(fnmatch.fnmatch(relative, glob) for glob in globs)


def looks_like_scenario(path: Path) -> bool:
    """Whether the file has top-level `agents:` and `steps:` keys (read as text, not parsed:
    a file that is not a scenario costs one read)."""
    try:
        if path.stat().st_size > _SNIFF_LIMIT:
            return False
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return bool(_AGENTS.search(text) and _STEPS.search(text))


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: list[pytest.Item]
) -> list[str]:
    """After collection, once: the note of each release modelled in part that the session
    runs on (`--agentsim-sdk`, a collected scenario file's `sdk:` or a deploy's)."""
    scenarios = [item.scenario for item in items if isinstance(item, ScenarioItem)]
    sdk = config.stash.get(_SDK, None)
    if sdk is None and not scenarios:
        return []
    from scenarios.language.releases import preview_notes, releases_run

    return preview_notes([*([sdk] if sdk else []), *releases_run(scenarios)], "agentsim")


class ScenarioFileInvalid(Exception):
    """A collected scenario file that does not validate: its errors, one line each."""


class ScenarioFile(pytest.File):
    """A scenario file: one `ScenarioItem` per seed."""

    def collect(self) -> Iterator[ScenarioItem]:
        from scenarios.language.errors import InvalidScenario
        from scenarios.language.loader import load_scenario
        from scenarios.language.releases import upgrade_problems

        shown = _shown_path(self.config, self.path)
        try:
            scenario = load_scenario(shown).on_release(self.config.stash.get(_SDK, None))
        except InvalidScenario as exc:
            raise ScenarioFileInvalid("\n".join(exc.lines())) from None
        downgrades = upgrade_problems(scenario)
        if downgrades:
            lines = [
                f"{error} (the run starts on {scenario.sdk}: --agentsim-sdk)"
                for error in downgrades
            ]
            raise ScenarioFileInvalid("\n".join(lines))
        given = self.config.getoption("agentsim_seed")
        own = (scenario.seed,) if given is None else (given,)
        seeds = self.config.stash.get(_SEEDS, None) or own
        for seed in seeds:
            yield ScenarioItem.from_parent(self, name=f"seed={seed}", scenario=scenario, seed=seed)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, ScenarioFileInvalid):
            return f"invalid scenario file (agentsim validate says):\n{excinfo.value}"
        return str(super().repr_failure(excinfo))


def _shown_path(config: pytest.Config, path: Path) -> str:
    """The path as `agentsim run` would be given it from where pytest was started."""
    start = Path(config.invocation_params.dir)
    try:
        return os.path.relpath(path, start) if path.is_relative_to(start) else str(path)
    except ValueError:
        return str(path)


class ScenarioFailed(AssertionError):
    """A scenario run that failed; its text is what `agentsim run` prints for it."""


class ScenarioItem(pytest.Item):
    """One scenario file run with one seed, as `agentsim run FILE --seed N` runs it."""

    def __init__(self, *, scenario: Scenario, seed: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.seed = seed
        self.result: ScenarioResult | None = None

    def runtest(self) -> None:
        from scenarios.run.runner import run_scenario

        invariants = self.config.stash.get(_INVARIANTS, ())
        self.result = result = run_scenario(self.scenario, self.seed, invariants=invariants)
        if not result.passed:
            raise ScenarioFailed(result.report(self._failure_file(result)))

    def _failure_file(self, result: ScenarioResult) -> list[str]:
        from scenarios.run.failures import RunRecord, failure_file_name

        directory = _failures_dir(self.config)
        target = directory / failure_file_name(result.name, result.seed)
        shown = _shown_path(self.config, target)
        try:
            RunRecord.of(result).write(target)
        except OSError as exc:
            return [f"failure file: not written ({exc.strerror or exc})"]
        return [f"failure file: {shown} (re-run it: agentsim replay {shown})"]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:  # type: ignore[override]
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.scenario.name} seed={self.seed}"
