"""The README's example runs and prints what its comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_runs_and_matches_its_comments(tmp_path: Path) -> None:
    """The python block of the README executes, and each commented print shows that value."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    script = tmp_path / "example.py"
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    printed = done.stdout.splitlines()
    expected = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+# ([^(].*)$", block, re.M)]
    assert printed[: len(expected)] == expected
    assert re.fullmatch(r"[0-9a-f]{64}", printed[-1])
