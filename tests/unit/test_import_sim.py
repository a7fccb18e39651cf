"""`import sim` alone gives what the README uses: `sim.record_text.render_all` renders records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_sim_makes_sim_record_text_usable() -> None:
    """In a fresh process (where nothing imported `sim.record_text` before), the README's line
    works after a bare `import sim`."""
    program = (
        "import sim\n"
        "s = sim.Simulation(seed=1)\n"
        "print(sim.record_text.render_all(s.trace.records).splitlines()[0].split()[-2:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['simulation:start', 'seed=1']"
