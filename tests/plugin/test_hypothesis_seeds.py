"""The `sim` fixture in a Hypothesis test: a fresh `Simulation` for each example, with the
fixture's seed, and one printed command (both seeds) that replays a failure.

As the plugin's other tests, each test writes a small project and runs pytest on it in a child
process, the plugin found through its entry point."""

from __future__ import annotations

import re
import shlex
import zlib
from pathlib import Path

from tests.plugin.test_plugin import _pytest

TESTS = """\
from hypothesis import given, settings, strategies as st

from scenarios.workloads import Counter


@settings(max_examples=25, database=None, deadline=None)
@given(n=st.integers(1, 4))
def test_examples_share_nothing(sim, n):
    ref = sim.agent(Counter, "c")
    for _ in range(n):
        sim.call(ref, "increment")
    assert sim.query(ref, "SELECT count(*) AS n FROM counts") == [{"n": n}]


@settings(max_examples=50, database=None, deadline=None)
@given(pause_ms=st.integers(0, 100_000))
def test_time_is_short(sim, pause_ms):
    sim.agent(Counter, "c")
    sim.run_for(pause_ms)
    print(f"EXAMPLE seed={sim.seed} now={sim.now_ms} digest={sim.digest()}")
    assert sim.now_ms < 31_234, "too late"


@settings(max_examples=20, database=None, deadline=None, derandomize=True)
@given(n=st.integers(0, 3))
def test_explained(sim, n):
    ref = sim.agent(Counter, "c")
    if n >= 2:
        sim.evict(ref, "explicit")  # only failing examples evict
    sim.call(ref, "increment")
    assert sim.incarnation_of(ref) == 1
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "test_hyp.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def test_each_example_gets_a_fresh_simulation(tmp_path: Path) -> None:
    """Examples do not see each other's agents or rows, and Hypothesis's function-scoped
    fixture health check does not fire for `sim` (it is reset per example)."""
    done = _pytest(_project(tmp_path), "test_hyp.py::test_examples_share_nothing")
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_failure_prints_one_command_with_both_seeds_that_replays_it(tmp_path: Path) -> None:
    """The agentsim section's replay line holds `--agentsim-seed` and `--hypothesis-seed`; run
    as printed, it fails with the same shrunk example and the same trace."""
    where = _project(tmp_path)
    node = "test_hyp.py::test_time_is_short"
    first = _pytest(where, node, "--hypothesis-seed", "7", "--agentsim-seed", "12")
    assert first.returncode == 1, first.stdout[-3000:]
    replay = re.search(r"^replay: (pytest .*)$", first.stdout, re.M)
    assert replay, first.stdout[-3000:]
    words = shlex.split(replay.group(1))
    assert words[:2] == ["pytest", node]
    assert words[2:] == ["--agentsim-seed", "12", "--hypothesis-seed", "7"], words
    again = _pytest(where, *words[1:])
    assert again.returncode == 1

    def last_example(out: str) -> str:
        return re.findall(r"^EXAMPLE .*$", out, re.M)[-1]

    assert last_example(first.stdout) == last_example(again.stdout)
    assert "now=31234" in last_example(first.stdout)  # the shrunk example, run last
    assert "seed=12 " in last_example(first.stdout)


def test_without_agentsim_seed_the_hypothesis_seed_alone_replays(tmp_path: Path) -> None:
    """The fixture's own seed comes from the node id, so `--hypothesis-seed N` alone gives the
    same failing example and trace, run after run."""
    where = _project(tmp_path)
    node = "test_hyp.py::test_time_is_short"
    runs = [_pytest(where, node, "--hypothesis-seed", "3") for _ in range(2)]
    examples = [re.findall(r"^EXAMPLE .*$", run.stdout, re.M)[-1] for run in runs]
    assert examples[0] == examples[1]
    assert f"seed={zlib.crc32(node.encode())} " in examples[0]
    assert "--hypothesis-seed 3" in runs[0].stdout


def test_the_failing_example_is_named_for_the_test_and_explained_by_user_lines(
    tmp_path: Path,
) -> None:
    """Hypothesis prints the failing example under the test's own name, and its explanation
    names no line of agentsim's (the plugin hides them as `sim.strategies` does)."""
    done = _pytest(_project(tmp_path), "test_hyp.py::test_explained")
    assert done.returncode == 1
    assert "Failing test case: test_explained(" in done.stdout, done.stdout[-3000:]
    explanation = done.stdout.split("Explanation:")[1].split("---")[0]
    assert re.search(r"test_hyp\.py:\d+", explanation), done.stdout[-3000:]
    from scenarios.hunt.explanations import AGENTSIM_FOLDERS

    assert not any(folder in explanation for folder in AGENTSIM_FOLDERS), explanation


SETTINGS = """\
from hypothesis import HealthCheck, settings


def test_settings():
    print("PROFILE", settings.get_current_profile_name(), settings.default.deadline,
          HealthCheck.too_slow in settings.default.suppress_health_check)
"""


def _profile_line(done) -> str:
    return next(line for line in done.stdout.splitlines() if line.startswith("PROFILE"))


def test_examples_are_not_judged_by_the_wall_clock_unless_the_project_says_so(
    tmp_path: Path,
) -> None:
    """With no profile of the project's own, the plugin loads one without Hypothesis's
    wall-clock deadline and slow-input health check (a simulated run is judged by simulated
    time, and its wall time depends on the machine's load); a profile the project loads keeps
    its settings, and so does one named by --hypothesis-profile."""
    (tmp_path / "test_settings.py").write_text(SETTINGS)
    env_ci = {"CI": None}
    done = _pytest(tmp_path, "-s", env=env_ci)
    assert _profile_line(done) == "PROFILE agentsim None True", done.stdout
    (tmp_path / "conftest.py").write_text(
        'from hypothesis import settings\n\nsettings.register_profile("mine", deadline=200)\n'
    )
    done = _pytest(tmp_path, "-s", "--hypothesis-profile=mine", env=env_ci)
    assert _profile_line(done) == "PROFILE mine 0:00:00.200000 False", done.stdout
    (tmp_path / "conftest.py").write_text(
        "from hypothesis import settings\n\n"
        'settings.register_profile("mine", deadline=200)\nsettings.load_profile("mine")\n'
    )
    done = _pytest(tmp_path, "-s", env=env_ci)
    assert _profile_line(done) == "PROFILE mine 0:00:00.200000 False", done.stdout
