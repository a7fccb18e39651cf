"""No malformed scenario file produces a traceback: Hypothesis breaks valid files at random
(deleted keys, wrong types, unknown keys, garbage, bad durations, bad indentation) and the loader
and `agentsim validate` answer only with `InvalidScenario` / exit 2 and one line per error. The
files broken include fixtures that use every key of the format (workloads, the model, the new
steps and expectations). Whatever the loader accepts, the shipped JSON Schema accepts too: the
schema is never stricter than the loader."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios import InvalidScenario, parse_scenario
from scenarios.cli import main
from scenarios.language.fields import plain
from scenarios.language.json_schema import scenario_json_schema
from scenarios.language.loader import read_document
from tests.scenarios.helpers import BASE, DATA, library_files

FIXTURES = sorted(DATA.glob("*.yaml"))
SOURCES = [BASE, *(p.read_text() for p in FIXTURES), *(p.read_text() for p in library_files())]
SCHEMA = jsonschema.Draft202012Validator(scenario_json_schema())
DOCUMENTS = [plain(read_document(text, "source.yaml")) for text in SOURCES]

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the suite stays deterministic; run with a seed by hand to explore more
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

BAD_DURATIONS = ["3 minutes", "-5s", "1.5h", "90x", "s", "", "1m1h", "10ms5s", "9" * 30, "1d1d"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(BAD_DURATIONS),
    st.sampled_from(["counter", "call", "increment", "scenarios.workloads:Counter", "a:b"]),
    st.sampled_from(
        ["fibers", "tools", "chat", "think", "scripted", "parent/r1", "r1", "worker", "alice"]
    ),
    st.sampled_from(["on_finish", "delivered", "all", "no_lost_stash", "resume", "throw"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def containers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths (keys and indexes from the root) of every dict and list in the document."""
    found = [path] if isinstance(node, dict | list) else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += containers(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += containers(value, (*path, index))
    return found


def at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


@st.composite
def broken_data(draw: st.DrawFn) -> str:
    """A valid document with one to three structural mutations, written as JSON (YAML)."""
    document = json.loads(json.dumps(draw(st.sampled_from(DOCUMENTS))))
    for _ in range(draw(st.integers(1, 3))):
        target = at(document, draw(st.sampled_from(containers(document))))
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        action = draw(st.sampled_from(["delete", "retype", "unknown", "duration", "empty"]))
        if action == "unknown" and isinstance(target, dict):
            keys_to_add = ["stpes", "at", "kind", "x", "agent", "count", "workload", "class"]
            keys_to_add += ["exactly", "never", "then", "reply", "run_id", "child", "frames"]
            target[draw(st.sampled_from(keys_to_add))] = draw(values)
        elif not keys:
            continue
        elif action == "delete":
            del target[draw(st.sampled_from(keys))]
        elif action == "duration":
            target[draw(st.sampled_from(keys))] = draw(st.sampled_from(BAD_DURATIONS))
        elif action == "empty":
            target[draw(st.sampled_from(keys))] = draw(st.sampled_from([{}, [], None, ""]))
        else:
            target[draw(st.sampled_from(keys))] = draw(values)
    return json.dumps(document)


@st.composite
def broken_text(draw: st.DrawFn) -> str:
    """A valid file with its text damaged: lines dropped, doubled, re-indented, garbage."""
    lines = draw(st.sampled_from(SOURCES)).splitlines()
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "double", "indent", "dedent", "garbage", "cut"]))
        if action == "drop" and len(lines) > 1:
            del lines[index]
        elif action == "double":
            lines.insert(index, lines[index])
        elif action == "indent":
            lines[index] = " " * draw(st.integers(1, 5)) + lines[index]
        elif action == "dedent":
            lines[index] = lines[index].lstrip()
        elif action == "garbage":
            column = draw(st.integers(0, len(lines[index])))
            junk = draw(st.text(alphabet=st.characters(codec="utf-8"), max_size=8))
            lines[index] = lines[index][:column] + junk + lines[index][column:]
        elif action == "cut":
            lines[index] = lines[index][: draw(st.integers(0, len(lines[index])))]
    return "\n".join(lines) + "\n"


def assert_only_invalid_scenario(text: str) -> None:
    """One located line, or a scenario whose document the JSON Schema accepts too."""
    try:
        parse_scenario(text, "fuzz.yaml")
    except InvalidScenario as error:
        message = str(error)
        assert message.startswith("fuzz.yaml") and "\n" not in message, message
        return
    document = plain(read_document(text, "fuzz.yaml"))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in SCHEMA.iter_errors(document)]
    assert errors == [], "the loader accepts what the schema rejects"


@FUZZ
@given(broken_data())
def test_structurally_broken_documents_raise_only_invalid_scenario(text: str) -> None:
    """Deleted keys, wrong types, unknown keys, empty values and bad durations: one error."""
    assert_only_invalid_scenario(text)


@FUZZ
@given(broken_text())
def test_textually_broken_files_raise_only_invalid_scenario(text: str) -> None:
    """Damaged indentation, doubled or dropped lines and garbage: one error, never a crash."""
    assert_only_invalid_scenario(text)


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_invalid_scenario(text: str) -> None:
    """Whatever the bytes say, the answer is a scenario or one located error."""
    assert_only_invalid_scenario(text)


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "broken.yaml"


@settings(FUZZ, max_examples=60, suppress_health_check=list(HealthCheck))
@given(st.one_of(broken_data(), broken_text()))
def test_validate_exits_0_or_2_with_one_line_per_error(fuzz_file: Path, text: str) -> None:
    """The CLI over the same files: exit 0 or 2, stderr empty or one located line per error
    (every error of the file, as many as `InvalidScenario.errors` holds)."""
    fuzz_file.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", str(fuzz_file)])
    assert code in (0, 2)
    if code == 0:
        assert err.getvalue() == "" and out.getvalue().startswith("ok ")
        return
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith(str(fuzz_file)) for line in lines), lines
    assert "Traceback" not in err.getvalue()
    try:
        parse_scenario(text, str(fuzz_file))
    except InvalidScenario as error:
        assert lines == error.lines()
