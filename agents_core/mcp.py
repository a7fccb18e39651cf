"""MCP servers, modelled only as far as the durable runtime depends on them: a registry of servers
in `cf_agents_mcp_servers` and its restore at startup, before the fiber recovery scan, so a
recovery hook can use a tool server the agent had connected (spec fibers §1.4 step 3, F-65).
Clients learn the list from `cf_agent_mcp_servers` frames in the SDK's shape (`{type, mcp:
{servers, tools, prompts, resources}}`): one on every connect, and a broadcast at every startup
(after the restore) and whenever a server is added or removed. The MCP protocol itself
(discovery, tool calls, OAuth) is not part of this port, so tools, prompts and resources are
always empty and a server's capabilities, instructions and error are null. The SDK's counterpart
is the `mcp` capability (`MCPClientManager`, the Agent's `this.mcp`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = ["MCP_SERVERS_DDL", "MCP_SERVERS_FRAME_TYPE", "Mcp"]

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


class Mcp:
    """One agent's MCP servers: the `cf_agents_mcp_servers` table and the connections."""

    __slots__ = ("_ctx", "_broadcast", "connections")

    def __init__(self, ctx: AgentContext, broadcast: Callable[[Any], None]) -> None:
        self._ctx = ctx
        self._broadcast = broadcast
        """Sends a protocol frame to every connection that takes protocol frames."""
        self.connections: dict[str, dict[str, Any]] = {}

    def add_server(self, name: str, url: str) -> str:
        """Register a server (durably) and connect it; returns its id."""
        server_id = self._ctx.host.entropy.nanoid(8)
        self._ctx.sql(
            "INSERT INTO cf_agents_mcp_servers (id, name, server_url) VALUES (?, ?, ?)",
            server_id,
            name,
            url,
        )
        self._connect(server_id, name, url, restored=False)
        self._broadcast_servers()
        return server_id

    def remove_server(self, server_id: str) -> None:
        self._ctx.sql("DELETE FROM cf_agents_mcp_servers WHERE id = ?", server_id)
        self.connections.pop(server_id, None)
        self._broadcast_servers()

    def servers(self) -> dict[str, Any]:
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
            for server_id, server in self.connections.items()
        }
        return {"prompts": [], "resources": [], "servers": servers, "tools": []}

    def servers_frame(self) -> dict[str, Any]:
        return {"type": MCP_SERVERS_FRAME_TYPE, "mcp": self.servers()}

    def _broadcast_servers(self) -> None:
        self._broadcast(self.servers_frame())

    def on_start(self) -> None:
        """Startup: reconnect every registered server, then tell the clients the list."""
        for row in self._ctx.sql(
            "SELECT id, name, server_url FROM cf_agents_mcp_servers ORDER BY rowid"
        ):
            self._connect(row["id"], row["name"], row["server_url"], restored=True)
        self._broadcast_servers()

    def _connect(self, server_id: str, name: str, url: str, *, restored: bool) -> None:
        self.connections[server_id] = {
            "id": server_id,
            "name": name,
            "url": url,
            "state": "ready",
        }
        self._ctx.host.trace.emit("mcp:connected", id=server_id, name=name, restored=restored)
