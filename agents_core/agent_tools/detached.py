"""Detached agent-tool runs (being written in this session): option parsing, dispatch, the warm
fast path, the self-scheduling reconcile backbone, budgets, cancel, notify and milestones."""

from __future__ import annotations

from typing import Any

__all__ = ["DetachedMixin"]


class DetachedMixin:
    def _parse_detached_option(self: Any, detached: Any) -> Any:
        if not detached:
            return None
        raise NotImplementedError("detached agent-tool runs are not built yet")

    def _detached_columns(self: Any, config: Any, started_at: int) -> dict[str, Any]:
        raise NotImplementedError("detached agent-tool runs are not built yet")

    async def _dispatch_detached_run(self: Any, *args: Any) -> Any:
        raise NotImplementedError("detached agent-tool runs are not built yet")

    async def _arm_detached_backbone(self: Any, *, reset_cadence: bool) -> None:
        raise NotImplementedError("detached agent-tool runs are not built yet")
