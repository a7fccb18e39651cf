"""The registry machine: API calls on a root agent and its sub-agents, evictions and time, with
the committed tables compared with the reference model after every rule. A clean tree matches
the model; a runtime slip planted in a test-only subclass, and a model made wrong, are both
reported."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios.model_check.agents import RegistryRoot
from scenarios.model_check.machine import ModelMismatch, registry_machine, run_registry_machine
from sim.checkers.models.registries import RegistriesModel


class OffByOneDelay(RegistryRoot):
    """A delayed schedule made one second late: a slip in the delay's arithmetic."""

    async def add_schedule(
        self, kind: str, value: Any, payload: Any = None, idempotent: bool | None = None
    ) -> dict[str, Any]:
        if kind == "delayed":
            value = int(value) + 1
        return await super().add_schedule(kind, value, payload, idempotent)


class DeletesInterrupted(RegistryRoot):
    """`delete_fibers` with the default statuses taking `interrupted` rows too."""

    async def forget(self, statuses: list[str] | None = None, limit: int | None = None) -> int:
        if statuses is None:
            statuses = ["completed", "aborted", "error", "interrupted"]
        return self.delete_fibers(status=statuses, limit=limit)


class ResolvesAnything(RegistriesModel):
    """A wrong model: `resolve_fiber` settles any row, not only an interrupted one."""

    def resolve_fiber(self, child: str | None, fiber_id: str, status: str) -> bool:
        super().resolve_fiber(child, fiber_id, status)
        return True


for planted in (OffByOneDelay, DeletesInterrupted):
    planted.__name__ = RegistryRoot.__name__  # the same paths as the clean root


def test_the_runtime_matches_the_model() -> None:
    run_registry_machine(registry_machine(), examples=60, steps=40)


@pytest.mark.long
def test_the_runtime_matches_the_model_over_500_examples() -> None:
    run_registry_machine(registry_machine(seed=1), examples=500, steps=80)


def test_a_schedule_made_a_second_late_is_reported() -> None:
    with pytest.raises(ModelMismatch, match=r"schedule\(delayed .* the model says"):
        run_registry_machine(
            registry_machine(root=OffByOneDelay), examples=60, steps=40, shrink=False
        )


def test_a_wrong_model_is_reported() -> None:
    with pytest.raises(ModelMismatch, match=r"resolve_fiber\(.*answered False"):
        run_registry_machine(
            registry_machine(model=ResolvesAnything), examples=60, steps=40, shrink=False
        )


def test_delete_fibers_taking_interrupted_rows_by_default_is_reported() -> None:
    """Step by step, as the machine would draw it: a long managed fiber, an eviction (the root's
    startup scan makes it `interrupted`), then `delete_fibers()` with the default statuses."""
    machine = registry_machine(root=DeletesInterrupted)()
    try:
        machine.tables_match_the_model()
        machine.start_fiber(None, 600_000, False, "none", None, 0, False)
        machine.tables_match_the_model()
        machine.evict(False)
        machine.tables_match_the_model()
        assert [f.status for f in machine.model.root.fibers] == ["interrupted"]
        with pytest.raises(ModelMismatch, match=r"delete_fibers\(status=None.*answered 1"):
            machine.delete_fibers(None, None, None)
    finally:
        machine.teardown()


def test_the_clean_root_keeps_interrupted_rows_step_by_step() -> None:
    machine = registry_machine()()
    try:
        machine.start_fiber(None, 600_000, False, "none", "k1", 0, False)
        machine.evict(False)
        machine.delete_fibers(None, None, None)
        machine.tables_match_the_model()
        machine.start_fiber(None, 1_000, False, "none", "k1", 0, False)  # a duplicate by key
        machine.resolve_fiber(None, 0, "completed")
        machine.delete_fibers(None, None, None)
        machine.tables_match_the_model()
        assert all(not f.in_ledger for f in machine.model.root.fibers)
    finally:
        machine.teardown()
