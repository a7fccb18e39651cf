"""The example in reports/README.md runs on a trace the CLI wrote, and does what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from scenarios.cli import main
from tests.reports.helpers import LIBRARY, ROOT


def test_the_readme_example_runs(tmp_path: Path) -> None:
    """It reads the trace, prints the short log and the summary, writes the HTML and JUnit."""
    assert (
        main(["run", str(LIBRARY / "idle-eviction.yaml"), "--trace", str(tmp_path / "traces")]) == 0
    )
    text = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    (tmp_path / "example.py").write_text(block.group(1), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["TIME", "AGENT", "INC", "EVENT", "DETAIL"]
    assert "incarnation:end               reason=idle" in done.stdout
    assert lines[-1] == "total: 1 run, 1 passed, 0 failed"
    assert 'data-verdict="pass"' in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert ET.parse(tmp_path / "junit.xml").getroot().get("tests") == "1"
