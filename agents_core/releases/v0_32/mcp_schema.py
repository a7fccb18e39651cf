"""0.32.0's MCP capability at startup: its table under its own schema key (spec sdk-0.32 §6.2).

Before it restores its servers, MCP reads `cf_agents:mcp_schema_version` (absent is 0); below 1
it creates `cf_agents_mcp_servers` and puts 1. The SDK does it with the asynchronous
`storage.get/put`; the port's key-value store is synchronous, and so is this step
(`schema_keys.MCP_SCHEMA` names the key and its version).
"""

from __future__ import annotations

from agents_core.mcp import MCP_SERVERS_DDL, Mcp
from agents_core.releases.v0_32.schema_keys import MCP_SCHEMA

__all__ = ["KeyedMcp"]


class KeyedMcp(Mcp):
    """The MCP of 0.32.0: its schema key checked, and its table made, before the restore."""

    __slots__ = ()

    def on_start(self) -> None:
        host = self._ctx.host
        stored = host.kv.get(MCP_SCHEMA.key)
        if (0 if stored is None else int(stored)) < MCP_SCHEMA.current:
            for statement in MCP_SERVERS_DDL:
                host.sql.execute(statement)
            host.kv.put(MCP_SCHEMA.key, MCP_SCHEMA.current)
        super().on_start()
