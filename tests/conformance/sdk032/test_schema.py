"""Conformance on SDK 0.32.0: the agent schema version 14, kept in the key-value store (spec
sdk-0.32 §6.1, catalogue J-69, J-70), and MCP's and State's own schema keys (§6.2)."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from agents_core import Agent
from sim import AgentRef, Simulation
from tests.conformance.fiber_agents import Recorder


def kv(sim: Simulation, ref: AgentRef, key: str) -> Any:
    """The stored JSON text of `key`, or None."""
    rows = sim.query(ref, "SELECT value FROM _cf_KV WHERE key = ?", key)
    return rows[0]["value"] if rows else None


def indexes(sim: Simulation, ref: AgentRef) -> list[str]:
    rows = sim.query(ref, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name")
    return [row["name"] for row in rows if not row["name"].startswith("sqlite_")]


def columns(sim: Simulation, ref: AgentRef, table: str) -> list[str]:
    return [row["name"] for row in sim.query(ref, f"PRAGMA table_info({table})")]


def woken(sim: Simulation, ref: AgentRef) -> None:
    """A new incarnation of `ref`, constructed (a call on a stub from before: no startup)."""
    sim.evict(ref, "deploy")
    assert sim.call(ref, "ping") == "pong"


def test_J069_a_0_21_schema_row_moves_to_the_kv_key_as_14(sim: Simulation) -> None:
    """A database of 0.21.0 (`cf_agents_state('cf_schema_version', '11')`, no KV key): when the
    agent constructs, KV `cf_agents:schema_version` is the number 14 and the legacy row is gone;
    the run rows and agent-tool runs have their 0.32.0 columns."""
    ref = sim.agent(Recorder, "s")
    sim.run_for(10)
    assert kv(sim, ref, "cf_agents:schema_version") == "14"
    assert sim.query(ref, "SELECT id FROM cf_agents_state WHERE id = 'cf_schema_version'") == []
    sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:schema_version'")
    sim.query(ref, "INSERT INTO cf_agents_state (id, state) VALUES ('cf_schema_version', '11')")
    woken(sim, ref)
    assert kv(sim, ref, "cf_agents:schema_version") == "14"
    assert sim.query(ref, "SELECT id FROM cf_agents_state WHERE id = 'cf_schema_version'") == []
    assert columns(sim, ref, "cf_agents_runs")[-3:] == ["completed_at", "outcome", "error_message"]
    assert "event_delivery" in columns(sim, ref, "cf_agent_tool_runs")


def test_J070_at_version_14_no_ddl_runs(sim: Simulation) -> None:
    """With KV `cf_agents:schema_version = 14`, constructing runs no DDL: an index dropped since
    stays dropped. Without the key (version 0), the next construction creates it again."""
    ref = sim.agent(Recorder, "s")
    sim.run_for(10)
    assert "idx_fibers_status_completed" in indexes(sim, ref)
    sim.query(ref, "DROP INDEX idx_fibers_status_completed")
    woken(sim, ref)
    assert "idx_fibers_status_completed" not in indexes(sim, ref)
    sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:schema_version'")
    woken(sim, ref)
    assert "idx_fibers_status_completed" in indexes(sim, ref)
    assert kv(sim, ref, "cf_agents:schema_version") == "14"


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_mcp_keeps_its_schema_version_under_its_own_key(sdk: str) -> None:
    """0.32.0's MCP puts `cf_agents:mcp_schema_version = 1` at startup, and below 1 makes its
    table first (spec sdk-0.32 §6.2); 0.21.0 has no such key."""
    with Simulation(seed=zlib.crc32(f"mcp-key-{sdk}".encode()), sdk=sdk) as sim:
        ref = sim.agent(Recorder, "s")
        sim.run_for(10)
        assert kv(sim, ref, "cf_agents:mcp_schema_version") == ("1" if sdk == "0.32.0" else None)
        if sdk == "0.32.0":
            sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:mcp_schema_version'")
            sim.query(ref, "DROP TABLE cf_agents_mcp_servers")
            sim.evict(ref, "deploy")
            sim.fetch(ref)  # startup: MCP's own step, before it restores its servers
            assert columns(sim, ref, "cf_agents_mcp_servers")[:2] == ["id", "name"]
            assert kv(sim, ref, "cf_agents:mcp_schema_version") == "1"


class Counter(Agent):
    """A plain method that reads the state and one that sets it (neither starts the agent)."""

    initial_state = {"count": 0}

    def read(self) -> Any:
        return self.state

    def bump(self) -> int:
        count = int(self.state["count"]) + 1
        self.set_state({"count": count})
        return count


def state_key(sim: Simulation, ref: AgentRef) -> Any:
    return kv(sim, ref, "cf_agents:state_schema_version")


@pytest.mark.parametrize("sdk", ["0.21.0", "0.32.0"])
def test_state_keeps_its_schema_version_under_its_own_key(sdk: str) -> None:
    """0.32.0's State capability puts `cf_agents:state_schema_version = 1` at startup (spec
    sdk-0.32 §6.2); 0.21.0 has no such key (its agent schema makes the state table)."""
    with Simulation(seed=zlib.crc32(f"state-key-{sdk}".encode()), sdk=sdk) as sim:
        ref = sim.agent(Counter, "c")
        sim.fetch(ref)
        assert state_key(sim, ref) == ("1" if sdk == "0.32.0" else None)
        assert sim.call(ref, "bump") == 1
        sim.evict(ref, "deploy")
        assert sim.call(ref, "read") == {"count": 1}


def test_state_below_its_version_deletes_the_legacy_flag_row_at_startup(
    sim: Simulation,
) -> None:
    """At version 1 the State capability trusts its table and leaves other rows alone; below it
    (no key) the next startup deletes the legacy `cf_state_was_changed` row and puts 1. The
    agent's construction alone (a plain RPC) does neither."""
    ref = sim.agent(Counter, "c")
    sim.fetch(ref)
    flag = "INSERT INTO cf_agents_state (id, state) VALUES ('cf_state_was_changed', 'true')"
    flagged = "SELECT id FROM cf_agents_state WHERE id = 'cf_state_was_changed'"
    sim.query(ref, flag)
    sim.evict(ref, "deploy")
    sim.fetch(ref)
    assert sim.query(ref, flagged) != []
    sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:state_schema_version'")
    sim.evict(ref, "deploy")
    assert sim.call(ref, "read") == {"count": 0}  # constructed, not started
    assert sim.query(ref, flagged) != []
    assert state_key(sim, ref) is None
    sim.fetch(ref)
    assert sim.query(ref, flagged) == []
    assert state_key(sim, ref) == "1"


def test_a_cold_agent_makes_its_state_table_on_first_need(sim: Simulation) -> None:
    """The agent schema no longer makes `cf_agents_state`: a plain RPC (no startup) to an
    agent without the table or its key reads and sets its state, making the table first."""
    ref = sim.agent(Counter, "c")
    sim.fetch(ref)
    sim.query(ref, "DROP TABLE cf_agents_state")
    sim.query(ref, "DELETE FROM _cf_KV WHERE key = 'cf_agents:state_schema_version'")
    sim.evict(ref, "deploy")
    assert sim.call(ref, "read") == {"count": 0}
    assert state_key(sim, ref) is None
    assert sim.call(ref, "bump") == 1
    assert sim.query(ref, "SELECT id FROM cf_agents_state") == [{"id": "cf_state_row_id"}]
