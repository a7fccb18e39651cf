"""The README's pytest and Hypothesis examples run, as a user's test file, and pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Testing your own agents with pytest and Hypothesis"

CONFTEST = """\
from hypothesis import HealthCheck, settings

settings.register_profile(
    "readme",
    max_examples=8,
    stateful_step_count=8,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
"""


def _examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def test_the_readme_examples_pass_as_a_test_file(tmp_path: Path) -> None:
    """Every python block of the section, in order, is one test module whose tests pass."""
    blocks = _examples()
    assert len(blocks) >= 2
    (tmp_path / "test_readme_examples_run.py").write_text("\n\n".join(blocks))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--hypothesis-profile=readme",
            "test_readme_examples_run.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b3 passed\b", done.stdout), done.stdout[-1000:]
