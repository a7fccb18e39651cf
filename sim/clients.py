"""Simulated WebSocket clients and the server side of each connection.

A `Client` is what a test holds: it connects to an agent, receives frames, sends messages,
disconnects and reconnects. Each connection the agent sees is a `ServerConnection` bound to one
incarnation; when that incarnation dies the connection closes (code 1006) and the client is told.
An open connection keeps its agent from idling. Like the SDK's client, a `Client` keeps what the
protocol frames of its latest connection said: `identity` (`cf_agent_identity`) and
`mcp_servers` (`cf_agent_mcp_servers`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Client", "ClientEvent", "ServerConnection"]


class Bound(Protocol):
    """What a connection asks of the incarnation it is bound to (`sim.incarnation.Incarnation`,
    which holds its connections, so this module names it only through this Protocol): whether
    it still lives."""

    @property
    def alive(self) -> bool: ...


IncarnationT = TypeVar("IncarnationT", bound=Bound)


@dataclass(frozen=True)
class ClientEvent:
    """What a client saw, in order: `open`, `frame`, `close`."""

    kind: str
    t_ms: int
    data: Any = None


@dataclass
class Client:
    """A client of one agent; survives its connections (reconnect opens a new one)."""

    agent_path: str
    name: str
    timeline: list[ClientEvent] = field(default_factory=list)
    connection: ServerConnection[Any] | None = None
    _platform: Any = field(default=None, repr=False)

    @property
    def connected(self) -> bool:
        return self.connection is not None and self.connection.open

    @property
    def frames(self) -> list[Any]:
        """Every frame received, across connections, in order."""
        return [event.data for event in self.timeline if event.kind == "frame"]

    @property
    def identity(self) -> dict[str, Any] | None:
        """`{"name", "agent"}` from the latest `cf_agent_identity` frame (None before one)."""
        frame = self._latest_frame("cf_agent_identity")
        return None if frame is None else {"name": frame.get("name"), "agent": frame.get("agent")}

    @property
    def mcp_servers(self) -> dict[str, Any] | None:
        """The MCP state of the latest `cf_agent_mcp_servers` frame (None before one)."""
        frame = self._latest_frame("cf_agent_mcp_servers")
        return None if frame is None else frame.get("mcp")

    def _latest_frame(self, frame_type: str) -> dict[str, Any] | None:
        for event in reversed(self.timeline):
            data = event.data
            if event.kind == "frame" and isinstance(data, dict) and data.get("type") == frame_type:
                return data
        return None

    def send(self, message: Any) -> None:
        """Send a message to the agent (delivered as the next event at this time)."""
        if not self.connected:
            raise RuntimeError(f"client {self.name!r} of {self.agent_path} is not connected")
        self._platform.client_message(self, message)

    def disconnect(self, code: int = 1000, reason: str = "client closed") -> None:
        if self.connected:
            self._platform.client_close(self, code, reason)

    def reconnect(self) -> None:
        """Open a new connection (closing the current one first, if any)."""
        self.disconnect(1000, "reconnect")
        self._platform.client_connect(self)

    def _saw(self, kind: str, t_ms: int, data: Any = None) -> None:
        self.timeline.append(ClientEvent(kind, t_ms, data))


class ServerConnection(Generic[IncarnationT]):
    """The agent's side of one connection (satisfies `agents_core.host.Connection`)."""

    def __init__(
        self,
        connection_id: str,
        client: Client,
        incarnation: IncarnationT,
        on_send: Callable[[ServerConnection[IncarnationT], Any], None],
        on_close: Callable[[ServerConnection[IncarnationT], int, str], None],
    ) -> None:
        self._id = connection_id
        self.client = client
        self.incarnation = incarnation
        self.open = True
        self._on_send = on_send
        self._on_close = on_close

    @property
    def id(self) -> str:
        return self._id

    def send(self, frame: Any) -> None:
        if self.open and self.incarnation.alive:
            self._on_send(self, frame)

    def close(self, code: int = 1000, reason: str = "") -> None:
        if self.open and self.incarnation.alive:
            self._on_close(self, code, reason)

    def __repr__(self) -> str:
        return f"<ServerConnection {self._id} of {self.client.agent_path} open={self.open}>"
