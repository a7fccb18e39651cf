"""Conformance: the rows `cf_agents_state` holds for an agent's state, as SDK 0.21.0 stores them
(index.ts `state`, `_setStateInternal`, `_ensureSchema`). The state lives in the one row
`cf_state_row_id`, whose existence alone says the state was set; the legacy
`cf_state_was_changed` flag row of the earlier layout is never written, and a schema migration
at startup deletes one left by an older runtime."""

from __future__ import annotations

from typing import Any

from agents_core import Agent
from agents_core.schema import CURRENT_SCHEMA_VERSION, SCHEMA_VERSION_ROW_ID
from sim import Simulation
from tests.releases import on_release

LEGACY_ROW = "cf_state_was_changed"


class Counter(Agent):
    initial_state = {"count": 0}

    async def bump(self) -> int:
        self.set_state({"count": self.state["count"] + 1})
        return self.state["count"]

    async def read(self) -> Any:
        return self.state


def state_ids(sim: Simulation, ref: Any) -> list[str]:
    rows = sim.query(ref, "SELECT id FROM cf_agents_state WHERE id LIKE 'cf_state%' ORDER BY id")
    return [row["id"] for row in rows]


def test_set_state_stores_the_state_row_alone(sim: Simulation) -> None:
    ref = sim.agent(Counter, "c")
    assert sim.call(ref, "bump") == 1
    assert state_ids(sim, ref) == ["cf_state_row_id"]
    rows = sim.query(ref, "SELECT state FROM cf_agents_state WHERE id = 'cf_state_row_id'")
    assert rows == [{"state": '{"count": 1}'}]


def test_the_state_row_alone_is_the_stored_state_in_a_later_incarnation(sim: Simulation) -> None:
    """A state row without a flag row beside it (what the SDK stores) is read back after an
    eviction, not mistaken for a state never set."""
    ref = sim.agent(Counter, "c")
    sim.call(ref, "bump")
    sim.evict(ref)
    sim.query(ref, "DELETE FROM cf_agents_state WHERE id = ?", LEGACY_ROW)
    assert sim.call(ref, "read") == {"count": 1}
    assert sim.call(ref, "bump") == 2


@on_release("0.21.0")
def test_a_schema_migration_deletes_the_legacy_flag_row(sim: Simulation) -> None:
    """Storage left by a runtime of the earlier layout (schema version below the current one,
    the flag row beside the state row): the next startup migrates the schema and deletes the
    flag row; the state is kept."""
    ref = sim.agent(Counter, "c")
    sim.call(ref, "bump")
    sim.evict(ref)
    sim.query(
        ref, "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES (?, 'true')", LEGACY_ROW
    )
    sim.query(
        ref,
        "UPDATE cf_agents_state SET state = ? WHERE id = ?",
        str(CURRENT_SCHEMA_VERSION - 1),
        SCHEMA_VERSION_ROW_ID,
    )
    assert sim.call(ref, "read") == {"count": 1}
    assert state_ids(sim, ref) == ["cf_state_row_id"]
    version = sim.query(
        ref, "SELECT state FROM cf_agents_state WHERE id = ?", SCHEMA_VERSION_ROW_ID
    )
    assert version == [{"state": str(CURRENT_SCHEMA_VERSION)}]


def test_a_current_schema_leaves_other_rows_alone(sim: Simulation) -> None:
    """The delete belongs to the migration: a startup with the current schema runs no DDL and
    no delete (the SDK's `_ensureSchema` skips its whole block then)."""
    ref = sim.agent(Counter, "c")
    sim.call(ref, "bump")
    sim.evict(ref)
    sim.query(
        ref, "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES (?, 'true')", LEGACY_ROW
    )
    assert sim.call(ref, "read") == {"count": 1}
    assert state_ids(sim, ref) == ["cf_state_row_id", LEGACY_ROW]
