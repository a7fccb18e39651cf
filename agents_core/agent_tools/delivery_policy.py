"""How a parent delivers a run's chunks to its clients: which it shows, and which take a place
in the run's frame sequence (spec agent-tools §3.1, §5.5).

0.21.0, this class: every chunk is shown and takes the next sequence; there is no
`event_delivery` option (one given is ignored, as the SDK ignores an option it does not know).
A release with another rule passes its own policy to `AgentTools` (0.32.0's terminal delivery
and positionless chunks: `agents_core/releases/v0_32/event_delivery.py`). How stored chunks are
numbered when they are sent again is the release's `StoredChunkReplay` (`stored_replay.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.agent_tools.run_store import RunStore

__all__ = ["FULL_DELIVERY", "EventDeliveryPolicy"]


class EventDeliveryPolicy:
    """0.21.0's delivery: every chunk, each at the next sequence."""

    __slots__ = ()

    def option(self, value: Any, detached: bool) -> str | None:
        """The `event_delivery` to store for a new run (None: the default, not stored); raises
        for a value the release refuses. Checked before the run id is looked up."""
        return None

    def terminal_only(self, store: RunStore, run_id: str) -> bool:
        """Whether the run's clients get only its lifecycle chunks (read once per forward)."""
        return False

    def row_terminal_only(self, row: Mapping[str, Any]) -> bool:
        """The same, from the run's row at hand (a replay)."""
        return False

    def shows(self, body: str, terminal_only: bool) -> bool:
        """Whether a chunk is broadcast to the parent's clients."""
        return True

    def takes_position(self, body: str, record: Mapping[str, Any]) -> bool:
        """Whether a forwarded chunk consumes its sequence (else the next one carries it too)."""
        return True

    def unstored_id(self, record: Mapping[str, Any]) -> str | None:
        """The id a chunk too large to store carries onto its frame (None: none)."""
        return None


FULL_DELIVERY = EventDeliveryPolicy()
