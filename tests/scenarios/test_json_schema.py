"""The JSON Schema shipped for editors: generated from the loader's own declarations, up to date
in the package, valid JSON Schema, accepting every bundled scenario and rejecting what is
structurally wrong."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from scenarios.language.fields import plain
from scenarios.language.json_schema import (
    SCHEMA_PATH,
    scenario_json_schema,
    schema_text,
    write_schema,
)
from scenarios.language.loader import SCENARIO, TOP_LEVEL_KEYS, read_document
from scenarios.language.parse_steps import STEP_SHAPES
from scenarios.language.schema import ACTIONS
from scenarios.language.shapes import Map, OneOf, Ref, Seq, Shape, Value
from tests.scenarios.helpers import DATA, library_files

BUNDLED = [*library_files(), *sorted(DATA.glob("*.yaml"))]
VALIDATOR = jsonschema.Draft202012Validator(scenario_json_schema())


def document(path: Path) -> Any:
    return plain(read_document(path.read_text(encoding="utf-8"), str(path)))


def test_the_shipped_schema_is_the_generated_one() -> None:
    """scenarios/scenario.schema.json is what the declarations give today (regenerate it with
    `python -m scenarios.language.json_schema`)."""
    shipped = SCHEMA_PATH.read_text(encoding="utf-8")
    assert shipped == schema_text(), "stale: run `python -m scenarios.language.json_schema`"
    packaged = resources.files("scenarios").joinpath("scenario.schema.json")
    assert packaged.is_file() and json.loads(packaged.read_text()) == scenario_json_schema()


def test_write_schema_writes_the_same_text(tmp_path: Path) -> None:
    """The writer the module's main uses writes exactly `schema_text()`."""
    target = write_schema(tmp_path / "s.json")
    assert target.read_text(encoding="utf-8") == schema_text()


def test_the_schema_is_valid_draft_2020_12() -> None:
    """A JSON Schema validator accepts the schema itself."""
    jsonschema.Draft202012Validator.check_schema(scenario_json_schema())
    assert scenario_json_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_every_bundled_scenario_validates(path: Path) -> None:
    """Library scenarios and test fixtures are valid against the shipped schema."""
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in VALIDATOR.iter_errors(document(path))
    ]
    assert errors == []


def test_the_schema_is_rendered_from_the_declarations() -> None:
    """Top-level keys, every step action and the evict reasons come from the same objects the
    loader reads with."""
    schema = scenario_json_schema()
    assert list(schema["properties"]) == list(TOP_LEVEL_KEYS)
    assert schema["required"] == list(SCENARIO.required)
    step_kinds = [
        next(key for key in option["required"])
        for option in schema["properties"]["steps"]["items"]["anyOf"]
    ]
    assert step_kinds == list(STEP_SHAPES) and sorted(step_kinds) == sorted(ACTIONS)
    evict = schema["properties"]["steps"]["items"]["anyOf"][step_kinds.index("evict")]
    reasons = evict["properties"]["evict"]["properties"]["reason"]["enum"]
    assert reasons == list(STEP_SHAPES["evict"].fields["reason"].choices)
    assert set(schema["$defs"]) == {"count", "duration", "matcher", "reply"}


BASE = {
    "name": "x",
    "description": "d",
    "seed": 1,
    "agents": {
        "a": {"class": "m:C"},
        "w": {"workload": "fibers", "fibers": [{"name": "f", "steps": 2}]},
    },
    "steps": [{"run_for": "3m"}],
}


@pytest.mark.parametrize(
    "change",
    [
        {"steeps": []},
        {"steps": [{"run_for": "3 minutes"}]},
        {"steps": [{"sleep": "3m"}]},
        {"steps": [{"at": "1m", "after": "1m", "deploy": None}]},
        {"steps": [{"evict": {"agent": "a", "reason": "sleepy"}}]},
        {"steps": [{"stall_model": {"then": {"text": "x"}}}]},
        {"agents": {"w": {"workload": "fibres", "fibers": []}}},
        {"agents": {"w": {"workload": "fibers", "fibers": []}}},
        {"agents": {"w": {"workload": "tools", "runs": [{"run_id": "r", "detached": "soon"}]}}},
        {"agents": {"w": {"workload": "chat", "model": {"reply": "x", "chunks": 0}}}},
        {"model": {"rules": [{"reply": {"say": "x"}}]}},
        {"model": {"default": {"stall": "1s", "then": 5}}},
        {"expect": [{"invariants": []}]},
        {"expect": [{"hook": "on_done"}]},
        {"expect": [{"hook": "on_finish", "exactly": 1, "count": {"exactly": 1}}]},
        {"expect": [{"order": [{"event": "a"}]}]},
        {"expect": [{"client": "c", "run": "r", "reduced": {"status": "done"}}]},
        {"expect": [{"event": "e", "count": {"exactly": 1, "never": True}}]},
    ],
    ids=lambda change: json.dumps(change)[:60],
)
def test_structural_mistakes_are_rejected_by_the_schema_too(change: dict[str, Any]) -> None:
    """What an editor can flag without the loader: unknown keys, enums, ranges, shapes."""
    assert VALIDATOR.is_valid(BASE)
    assert not VALIDATOR.is_valid({**BASE, **change})


def declared_keys(value: Value, seen: set[int] | None = None) -> set[str]:
    """Every key of every shape reachable from `value`."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return set()
    seen.add(id(value))
    if isinstance(value, Ref):
        return declared_keys(value.resolve(), seen)
    if isinstance(value, Shape):
        keys = set(value.fields)
        for inner in value.fields.values():
            keys |= declared_keys(inner, seen)
        return keys
    if isinstance(value, Seq):
        return declared_keys(value.item, seen)
    if isinstance(value, Map):
        return declared_keys(value.values, seen)
    if isinstance(value, OneOf):
        return set().union(*(declared_keys(option, seen) for option in value.options))
    return set()


def used_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node).union(*(used_keys(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(used_keys(item) for item in node))
    return set()


def test_the_fixtures_use_every_key_of_the_format() -> None:
    """So the fuzzer (which breaks these files) and the tests above reach every declaration."""
    used = set().union(*(used_keys(document(path)) for path in sorted(DATA.glob("*.yaml"))))
    assert declared_keys(SCENARIO) - used == set()
