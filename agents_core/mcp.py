"""MCP servers, modelled only as far as the durable runtime depends on them: a registry of servers
in `cf_agents_mcp_servers` and its restore at startup, before the fiber recovery scan, so a
recovery hook can use a tool server the agent had connected (spec fibers §1.4 step 3, F-65).
Clients learn the list from `cf_agent_mcp_servers` frames in the SDK's shape (`{type, mcp:
{servers, tools, prompts, resources}}`): one on every connect, and a broadcast at every startup
(after the restore) and whenever a server is added or removed. The MCP protocol itself
(discovery, tool calls, OAuth) is not part of this port, so tools, prompts and resources are
always empty and a server's capabilities, instructions and error are null."""

from __future__ import annotations

from typing import Any, Protocol

from agents_core.self_types import AgentSelf

__all__ = ["MCP_SERVERS_DDL", "MCP_SERVERS_FRAME_TYPE", "McpMixin"]

MCP_SERVERS_DDL = (
    """CREATE TABLE IF NOT EXISTS cf_agents_mcp_servers (
        id TEXT PRIMARY KEY NOT NULL,
        name TEXT NOT NULL,
        server_url TEXT NOT NULL,
        client_id TEXT,
        auth_url TEXT,
        callback_url TEXT NOT NULL DEFAULT '',
        server_options TEXT
    )""",
)


MCP_SERVERS_FRAME_TYPE = "cf_agent_mcp_servers"


class McpSelf(AgentSelf, Protocol):
    """What McpMixin uses of the agent it is mixed into."""

    mcp_connections: dict[str, dict[str, Any]]

    def _broadcast_protocol(self, frame: Any) -> None: ...

    # its own methods, called through self
    def _connect_mcp(self, server_id: str, name: str, url: str, *, restored: bool) -> None: ...
    def _broadcast_mcp_servers(self) -> None: ...
    def get_mcp_servers(self) -> dict[str, Any]: ...
    def _mcp_servers_frame(self) -> dict[str, Any]: ...


class McpMixin:
    def _init_mcp_state(self: McpSelf) -> None:
        self.mcp_connections: dict[str, dict[str, Any]] = {}

    def add_mcp_server(self: McpSelf, name: str, url: str) -> str:
        """Register a server (durably) and connect it; returns its id."""
        server_id = self.host.entropy.nanoid(8)
        self.sql(
            "INSERT INTO cf_agents_mcp_servers (id, name, server_url) VALUES (?, ?, ?)",
            server_id,
            name,
            url,
        )
        self._connect_mcp(server_id, name, url, restored=False)
        self._broadcast_mcp_servers()
        return server_id

    def remove_mcp_server(self: McpSelf, server_id: str) -> None:
        self.sql("DELETE FROM cf_agents_mcp_servers WHERE id = ?", server_id)
        self.mcp_connections.pop(server_id, None)
        self._broadcast_mcp_servers()

    def get_mcp_servers(self: McpSelf) -> dict[str, Any]:
        """The SDK's `MCPServersState`: every registered server by id, and the (here always
        empty) tools, prompts and resources they offer."""
        servers = {
            server_id: {
                "auth_url": None,
                "capabilities": None,
                "error": None,
                "instructions": None,
                "name": server["name"],
                "server_url": server["url"],
                "state": server["state"],
            }
            for server_id, server in self.mcp_connections.items()
        }
        return {"prompts": [], "resources": [], "servers": servers, "tools": []}

    def _mcp_servers_frame(self: McpSelf) -> dict[str, Any]:
        return {"type": MCP_SERVERS_FRAME_TYPE, "mcp": self.get_mcp_servers()}

    def _broadcast_mcp_servers(self: McpSelf) -> None:
        self._broadcast_protocol(self._mcp_servers_frame())

    def _restore_mcp_connections(self: McpSelf) -> None:
        for row in self.sql(
            "SELECT id, name, server_url FROM cf_agents_mcp_servers ORDER BY rowid"
        ):
            self._connect_mcp(row["id"], row["name"], row["server_url"], restored=True)

    def _connect_mcp(self: McpSelf, server_id: str, name: str, url: str, *, restored: bool) -> None:
        self.mcp_connections[server_id] = {
            "id": server_id,
            "name": name,
            "url": url,
            "state": "ready",
        }
        self.host.trace.emit("mcp:connected", id=server_id, name=name, restored=restored)
