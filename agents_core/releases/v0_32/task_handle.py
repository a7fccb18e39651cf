"""`TaskHandle`: one Task definition's view of the runs (`tasks.handle(name)`, spec sdk-0.32
§6.5). It holds no state: `run` starts a run of its definition, and `get`,
`get_by_idempotency_key` and `cancel` see only that definition's runs (another's answer None,
or False)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["TaskHandle"]


class Runs(Protocol):
    """What a handle takes of the capability (`tasks.Tasks`)."""

    async def run(
        self,
        definition: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        retain: bool = True,
    ) -> dict[str, Any]: ...

    async def get(self, run_id: str, *, definition: str | None = None) -> dict[str, Any] | None: ...

    async def get_by_idempotency_key(
        self, idempotency_key: str, *, definition: str | None = None
    ) -> dict[str, Any] | None: ...

    async def cancel(
        self, run_id: str, reason: str | None = None, *, definition: str | None = None
    ) -> bool: ...


class TaskHandle:
    __slots__ = ("_tasks", "name")

    def __init__(self, tasks: Runs, name: str) -> None:
        self._tasks = tasks
        self.name = name

    def __repr__(self) -> str:
        return f"TaskHandle({self.name!r})"

    async def run(
        self,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        retain: bool = True,
    ) -> dict[str, Any]:
        return await self._tasks.run(
            self.name,
            input,
            idempotency_key=idempotency_key,
            run_id=run_id,
            metadata=metadata,
            retain=retain,
        )

    async def get(self, run_id: str) -> dict[str, Any] | None:
        return await self._tasks.get(run_id, definition=self.name)

    async def get_by_idempotency_key(self, idempotency_key: str) -> dict[str, Any] | None:
        return await self._tasks.get_by_idempotency_key(idempotency_key, definition=self.name)

    async def cancel(self, run_id: str, reason: str | None = None) -> bool:
        return await self._tasks.cancel(run_id, reason, definition=self.name)
