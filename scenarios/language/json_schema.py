"""The JSON Schema of the scenario format, for editors: generated, never written by hand.

`scenario_json_schema()` renders `scenarios.language.loader.SCENARIO` — the declarations the
loader validates with — as a JSON Schema (draft 2020-12); shared and recursive parts (durations,
counts, matchers, model replies) go to `$defs`. `scenarios/scenario.schema.json` is that schema
as shipped in the package; a test checks it is up to date, and
`python -m scenarios.language.json_schema` rewrites it. An editor with a YAML language server picks
it up from a first line such as

    # yaml-language-server: $schema=../scenario.schema.json

The schema checks the shape of a file; what needs the scenario as a whole (an alias that must
exist, a method of that agent's class, a run id of that workload) only the loader checks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scenarios.language.loader import SCENARIO

__all__ = ["SCHEMA_PATH", "scenario_json_schema", "schema_text", "write_schema"]

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "scenario.schema.json"
"""Where the shipped schema lives (package data)."""
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file."""
    defs: dict[str, Any] = {}
    body = SCENARIO.schema(defs)
    return {
        "$schema": DIALECT,
        "title": "agentsim scenario",
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def schema_text() -> str:
    """The schema as the shipped file holds it (two-space indented JSON, a final newline)."""
    return json.dumps(scenario_json_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: str | Path = SCHEMA_PATH) -> Path:
    """Write the schema to `path` (the shipped file by default); returns the path."""
    target = Path(path)
    target.write_text(schema_text(), encoding="utf-8")
    return target


if __name__ == "__main__":
    print(write_schema(sys.argv[1] if len(sys.argv) > 1 else SCHEMA_PATH))
