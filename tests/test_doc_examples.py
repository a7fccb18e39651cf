"""Every example of README.md and docs/*.md runs: YAML scenarios are validated and run, YAML
fragments are validated inside the scenario their mark names, Python blocks run, the `agentsim`
commands of bash blocks run, JSON parses (tests/doc_blocks.py says how a block is marked)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scenarios.language.loader import parse_scenario
from tests import test_readme
from tests.doc_blocks import ROOT, Block, blocks, program_of

ALL = blocks()
AGENTSIM = str(Path(sys.executable).with_name("agentsim"))
PLACES = ("top", "agents", "steps", "expect")
_FRAGMENT = re.compile(r"^fragment in (\S+) at (\w+)$")


def _of(kind: str) -> list[Any]:
    return [pytest.param(b, id=b.where) for b in ALL if b.kind == kind]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


def _workdir(tmp_path: Path) -> Path:
    """A scratch folder that sees the project's files as the root does, so that a command's
    relative paths resolve and its output folders land outside the tree."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")  # copied: paths written are relative
    for name in ("scenarios", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _honour(block: Block) -> None:
    """Skip a block marked `skip (why)`; check that a `checked by TEST` names a real test."""
    mark = block.mark
    if mark.startswith("skip"):
        reason = re.fullmatch(r"skip \((.+)\)", mark)
        assert reason, f"{block.where}: a skip says why: <!-- example: skip (why) -->"
        pytest.skip(f"{block.where}: {reason.group(1)}")
    if mark.startswith("checked by "):
        name = mark.removeprefix("checked by ")
        assert callable(getattr(test_readme, name, None)), f"{block.where}: no test {name}"
        pytest.skip(f"{block.where}: run by tests/test_readme.py::{name}")


def test_every_block_is_of_a_known_language_and_mark() -> None:
    """A block of a language no test runs, or with a mark no test reads, fails here."""
    marks = re.compile(r"^(|skip \(.+\)|continues|exit \d+|checked by \w+|fragment in \S+ at \w+)$")
    wrong = [f"{b.where}: language {b.language!r}" for b in ALL if b.kind.startswith("unknown")]
    wrong += [f"{b.where}: mark {b.mark!r}" for b in ALL if not marks.match(b.mark)]
    assert not wrong, "\n".join(wrong)
    assert len([b for b in ALL if b.kind in ("yaml", "python")]) > 20


def _merge(base: dict[str, Any], fragment: Any, place: str, where: str) -> dict[str, Any]:
    merged = dict(base)
    if place in ("steps", "expect"):
        assert isinstance(fragment, list), f"{where}: a fragment at {place} is a list"
        merged[place] = [*(merged.get(place) or []), *fragment]
    elif place == "agents":
        assert isinstance(fragment, dict), f"{where}: a fragment at agents is a mapping"
        merged["agents"] = {**merged["agents"], **fragment}
    else:
        assert place == "top" and isinstance(fragment, dict), f"{where}: place one of {PLACES}"
        for key, value in fragment.items():
            if key in ("agents", "clients") and isinstance(value, dict):
                merged[key] = {**(merged.get(key) or {}), **value}
            else:
                merged[key] = value
    return merged


@pytest.mark.parametrize("block", _of("yaml"))
def test_yaml_example(block: Block, tmp_path: Path) -> None:
    """A whole scenario validates and passes `agentsim run`; a fragment validates in its base."""
    _honour(block)
    fragment = _FRAGMENT.match(block.mark)
    if fragment:
        base_path = ROOT / fragment.group(1)
        base = yaml.safe_load(base_path.read_text(encoding="utf-8"))
        merged = _merge(base, yaml.safe_load(block.text), fragment.group(2), block.where)
        parse_scenario(yaml.safe_dump(merged, sort_keys=False), str(base_path))
        return
    assert block.mark == "", f"{block.where}: mark {block.mark!r} means nothing for YAML"
    name = yaml.safe_load(block.text).get("name", "example")
    path = _workdir(tmp_path) / f"{name}.yaml"
    path.write_text(block.text, encoding="utf-8")
    done = subprocess.run(
        [AGENTSIM, "run", str(path)], cwd=tmp_path, capture_output=True, text=True, env=_env()
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("block", _of("python"))
def test_python_example(block: Block, tmp_path: Path) -> None:
    """A Python block runs to the end (by pytest, when it defines tests, which must pass)."""
    _honour(block)
    program = program_of(block, ALL)
    is_tests = re.search(r"^def test_", program, re.M) is not None
    script = tmp_path / ("test_example.py" if is_tests else "example.py")
    script.write_text(program, encoding="utf-8")
    command = [sys.executable, str(script)]
    if is_tests:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=_env())
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"


@pytest.mark.parametrize("block", _of("bash"))
def test_bash_example(block: Block, tmp_path: Path) -> None:
    """Each `agentsim` command of a bash block exits as its mark says (0 by default)."""
    _honour(block)
    expected = int(block.mark.removeprefix("exit ")) if block.mark.startswith("exit ") else 0
    commands = [line for line in block.text.splitlines() if line.startswith("agentsim ")]
    assert commands, f"{block.where}: no agentsim command to run; mark it skip (why)"
    cwd = _workdir(tmp_path)
    for line in commands:
        argv = [AGENTSIM, *shlex.split(line)[1:]]
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_env())
        assert done.returncode == expected, f"{block.where}: {line}\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("block", _of("json"))
def test_json_example(block: Block) -> None:
    """A JSON block parses."""
    _honour(block)
    json.loads(block.text)
