"""0.32.0's per-capability schema versions: one number per capability in the key-value store
(spec sdk-0.32 §6.2).

Each capability that owns tables versions them under a key of its own, apart from the agent's
`cf_agents:schema_version` (`agent_schema.py`), and migrates them in its `onStart`: read the
key (absent is 0); at or above the current version, do nothing; below it, migrate, then put the
current version. The SDK reads and writes these keys with the asynchronous `storage.get/put`,
so the steps here are coroutines and a caller awaits them where the SDK does; the port's
key-value store is synchronous, so they never suspend.

    SCHEDULES_SCHEMA.migrate(host.kv, migrate_schedules_to_jobs)

`migrate` runs the step with the version it found and puts the current one after it; a step
that throws leaves the key as it was, so the next startup migrates again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents_core.host import KeyValue

__all__ = [
    "MCP_SCHEMA",
    "QUEUE_SCHEMA",
    "SCHEDULES_SCHEMA",
    "SCHEMA_KEYS",
    "SESSIONS_SCHEMA",
    "STATE_SCHEMA",
    "STREAMS_SCHEMA",
    "TASKS_SCHEMA",
    "SchemaKey",
]


@dataclass(frozen=True, slots=True)
class SchemaKey:
    """One capability's schema version: its KV `key` and the `current` version of 0.32.0."""

    key: str
    current: int

    async def version(self, kv: KeyValue) -> int:
        """The stored version (`await storage.get(key) ?? 0`)."""
        stored = kv.get(self.key)
        return 0 if stored is None else int(stored)

    async def is_current(self, kv: KeyValue) -> bool:
        return await self.version(kv) >= self.current

    async def put_current(self, kv: KeyValue) -> None:
        """`await storage.put(key, current)`."""
        kv.put(self.key, self.current)

    async def migrate(self, kv: KeyValue, step: Callable[[int], Awaitable[None]]) -> bool:
        """Below the current version: `await step(stored)`, then put the current version;
        whether it ran. At or above it: nothing."""
        stored = await self.version(kv)
        if stored >= self.current:
            return False
        await step(stored)
        await self.put_current(kv)
        return True


SCHEDULES_SCHEMA = SchemaKey("cf_agents:schedules_schema_version", 2)
"""The Scheduler's: 1 was 0.22's Scheduler owning `cf_agents_schedules`, 2 its rows in jobs."""
QUEUE_SCHEMA = SchemaKey("cf_agents:queue_schema_version", 1)
"""The Queue's: 1 is `cf_agents_queues` moved into jobs."""
TASKS_SCHEMA = SchemaKey("cf_agents:tasks_schema_version", 1)
STREAMS_SCHEMA = SchemaKey("cf_agents:streams_schema_version", 2)
SESSIONS_SCHEMA = SchemaKey("cf_agents:sessions_schema_version", 1)
MCP_SCHEMA = SchemaKey("cf_agents:mcp_schema_version", 1)
STATE_SCHEMA = SchemaKey("cf_agents:state_schema_version", 1)
"""The State capability's (`state/index.js`): 1 is its table, the legacy flag row deleted."""

SCHEMA_KEYS: tuple[SchemaKey, ...] = (
    SCHEDULES_SCHEMA,
    QUEUE_SCHEMA,
    TASKS_SCHEMA,
    STREAMS_SCHEMA,
    SESSIONS_SCHEMA,
    MCP_SCHEMA,
    STATE_SCHEMA,
)
"""Every capability schema key of 0.32.0, as the spec's table lists them (and State's)."""
