"""The real side plays reattach-after-parent-restart the same way every time: the startup guard
(`differential/src/startup.ts`) starts an instance once when two first calls reach it together,
which the SDK's own start does not, and the story's plays agree with one another and with
agentsim (needs Node and `npm ci` in differential/; skipped with the reason otherwise)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scenarios.diff import diff_scenarios
from scenarios.diff.workerd import PROJECT, missing_reason

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"real side unavailable: {REASON}")


def test_two_first_calls_start_an_instance_once_and_the_sdk_alone_twice() -> None:
    """differential/test/startup.test.ts in workerd: two first calls sent together to a fresh
    agent run the SDK's startup once with the guard and twice without it (agents 0.21.0 checks
    its started status outside blockConcurrencyWhile only)."""
    vitest = PROJECT / "node_modules" / "vitest" / "vitest.mjs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSIM_DIFF_")}
    env.update(NO_COLOR="1", CI="1")
    done = subprocess.run(
        ["node", str(vitest), "run", "test/startup.test.ts"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "2 passed" in output, output[-3000:]


def test_the_reattach_story_agrees_over_five_plays() -> None:
    """reattach-after-parent-restart, refused as unstable until the real side started a
    sub-agent once and waited for calls between agents: five plays agree with one another and
    with agentsim (the child resumes once, at the reconnect's 250 ms, and the run completes at
    700 ms)."""
    name = "reattach-after-parent-restart"
    verdicts, refused = diff_scenarios([str(LIBRARY / f"{name}.yaml")], repeat=5)
    assert not refused
    assert [(v.name, v.word) for v in verdicts] == [(name, "AGREE")], verdicts[0].text()
    assert "5 plays" in verdicts[0].detail
