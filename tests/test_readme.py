"""The README's examples: the first one runs and prints what its comments say, its `Researcher`
is the one `docs/examples/researcher.py` ships, and the fuzz passage finds what it shows."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.doc_blocks import ROOT, Block, blocks_of

README = ROOT / "README.md"
AGENTSIM = str(Path(sys.executable).with_name("agentsim"))


def _readme_blocks(mark: str = "") -> list[Block]:
    return [b for b in blocks_of(README) if not mark or b.mark == mark]


def test_readme_example_runs_and_matches_its_comments(tmp_path: Path) -> None:
    """The python block of the README executes, and each commented print shows that value."""
    block = next(b.text for b in _readme_blocks() if b.kind == "python")
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


def _class_source(source: str, name: str) -> str:
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
    return ast.get_source_segment(source, node) or ""


def test_the_readme_researcher_is_the_shipped_one() -> None:
    """The README's `Researcher` is `docs/examples/researcher.py`'s, word for word, so the
    class the fuzz passage vouches for is the one the reader copies."""
    block = next(b.text for b in _readme_blocks() if b.kind == "python")
    shipped = (ROOT / "docs/examples/researcher.py").read_text(encoding="utf-8")
    assert _class_source(block, "Researcher") == _class_source(shipped, "Researcher")


def test_the_readme_researcher_survives_a_deploy_before_its_first_stash() -> None:
    """A deploy one second in, before any stash(): the research starts again from step 0 and
    the report is written once (the first version lost it: its hook read a None snapshot)."""
    from sim import Simulation

    sys.path.insert(0, str(ROOT / "docs/examples"))
    try:
        from researcher import Researcher
    finally:
        sys.path.remove(str(ROOT / "docs/examples"))
    with Simulation(seed=42) as sim:
        agent = sim.agent(Researcher, "r1")
        sim.call(agent, "research", "fibers")
        sim.run_for(1_000)
        sim.deploy()
        sim.run_for(600_000)
        assert [r.get("done") for r in sim.trace.select("user:resumed")] == [0]
        assert not sim.trace.select("fiber:recovery:failed")
        assert sim.query(agent, "SELECT topic FROM reports") == [{"topic": "fibers"}]


def _fuzz(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A copy, not a link: the reproducer's python_path is relative to the real folder.
    shutil.copytree(ROOT / "docs/examples", cwd / "docs/examples")
    argv = [AGENTSIM, *shlex.split(command)[1:]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)


def test_fuzz_finds_the_hole_in_the_naive_researcher(tmp_path: Path) -> None:
    """The README's fuzz command, run as shown, finds the naive Researcher's hole with the
    seed shown: its key output lines are the README's, the reproducer it writes is the one the
    README shows (its scenario, byte for byte, and its failure), and that file fails when run.
    The same command on the fixed Researcher finds nothing."""
    marked = _readme_blocks("checked by test_fuzz_finds_the_hole_in_the_naive_researcher")
    command_block, shown = (next(b for b in marked if b.kind == k) for k in ("bash", "yaml"))
    (command,) = command_block.text.splitlines()
    output = next(b for b in _readme_blocks() if b.line > command_block.line)
    assert output.kind == "text"

    naive = tmp_path / "naive"
    naive.mkdir()
    done = _fuzz(command, naive)
    assert done.returncode == 1, done.stdout + done.stderr
    printed = done.stdout.splitlines()
    for line in output.text.splitlines():
        if "..." not in line:  # elided: run counts, the probes reached
            assert line in printed, f"README shows {line!r}; fuzz printed:\n{done.stdout}"
    written = (naive / "agentsim-fuzz/researcher-naive-fuzz-1.yaml").read_text(encoding="utf-8")

    def body(text: str) -> str:
        return text[text.index("\nname: ") :]

    def fails_with(text: str) -> str:
        return next(line for line in text.splitlines() if line.startswith("# It fails with:"))

    assert body(written) == body(shown.text), "the README's reproducer is not what fuzz writes"
    assert fails_with(written) == fails_with(shown.text)
    rerun = subprocess.run(
        [AGENTSIM, "run", "agentsim-fuzz/researcher-naive-fuzz-1.yaml"],
        cwd=naive,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert rerun.returncode == 1 and "returned [], expected" in rerun.stdout, rerun.stdout

    fixed = tmp_path / "fixed"
    fixed.mkdir()
    done = _fuzz(command.replace("researcher-naive.yaml", "researcher.yaml"), fixed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.lower().startswith("no failure found in docs/examples/researcher.yaml")
