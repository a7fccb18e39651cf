"""The per-capability schema keys of SDK 0.32.0 (`agents_core.releases.v0_32.schema_keys`,
spec sdk-0.32 §6.2): a migration runs below the current version only, puts the current
version after it, and leaves the key as it was when it throws."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import pytest

from agents_core.releases.v0_32.schema_keys import (
    SCHEDULES_SCHEMA,
    SCHEMA_KEYS,
    SchemaKey,
)


class Kv:
    """A key-value store as the host gives one (values kept as given)."""

    def __init__(self, **values: Any) -> None:
        self.values: dict[str, Any] = dict(values)

    def get(self, key: str) -> Any | None:
        return self.values.get(key)

    def put(self, key: str, value: Any) -> None:
        self.values[key] = value

    def delete(self, key: str) -> bool:
        return self.values.pop(key, None) is not None

    def list(self, prefix: str = "") -> dict[str, Any]:
        return {k: v for k, v in sorted(self.values.items()) if k.startswith(prefix)}


def done(coro: Coroutine[Any, Any, Any]) -> Any:
    """The value of a coroutine that never suspends (the helper's never do)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine suspended")


def test_the_keys_and_current_versions_are_0_32s() -> None:
    assert {key.key: key.current for key in SCHEMA_KEYS} == {
        "cf_agents:schedules_schema_version": 2,
        "cf_agents:queue_schema_version": 1,
        "cf_agents:tasks_schema_version": 1,
        "cf_agents:streams_schema_version": 2,
        "cf_agents:sessions_schema_version": 1,
        "cf_agents:mcp_schema_version": 1,
        "cf_agents:state_schema_version": 1,
    }


@pytest.mark.parametrize(("stored", "runs"), [(None, True), (1, True), (2, False), (3, False)])
def test_a_migration_runs_only_below_the_current_version(stored: int | None, runs: bool) -> None:
    kv = Kv() if stored is None else Kv(**{SCHEDULES_SCHEMA.key: stored})
    seen: list[int] = []

    async def step(version: int) -> None:
        seen.append(version)

    assert done(SCHEDULES_SCHEMA.migrate(kv, step)) is runs
    assert seen == ([0 if stored is None else stored] if runs else [])
    assert kv.get(SCHEDULES_SCHEMA.key) == (2 if runs else stored)
    assert done(SCHEDULES_SCHEMA.is_current(kv)) is True


def test_a_migration_that_throws_leaves_the_key_as_it_was() -> None:
    key = SchemaKey("cf_agents:example_schema_version", 1)
    kv = Kv()

    async def step(version: int) -> None:
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        done(key.migrate(kv, step))
    assert kv.get(key.key) is None
    assert done(key.version(kv)) == 0
    done(key.put_current(kv))
    assert done(key.version(kv)) == 1
