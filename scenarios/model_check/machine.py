"""The registry machine: a Hypothesis `RuleBasedStateMachine` whose rules are API calls on a
simulated root agent and its sub-agents, with evictions and time between them, checked after
every rule against the reference model of the registries (`sim.checkers.models.registries`).

Each rule makes one call on the `Simulation` (`scenarios.model_check.agents`): a schedule of each
kind made or cancelled (from the root or a sub-agent, deduplicated or not), an unmanaged or a
managed fiber started (with or without an id and a key, duplicates included), a fiber cancelled,
resolved or deleted, a sub-agent made, deleted and made again, an agent-tool run dispatched
(awaited or detached, new or re-issued), cancelled or cleared; or it evicts the root (every
sub-agent dies with it) or lets time run. The model is told the same and says what the call
must answer; after every rule, an invariant compares the model with every committed table.

The machine runs SDK 0.21.0 whatever the default release is: the model and the tables it reads
(`cf_agents_schedules` and its columns) are 0.21.0's; 0.32.0 keeps schedules as jobs.

`registry_machine(root=..., model=...)` builds the machine class; a test passes a root class
with a planted mistake or a model with one, and the machine must report it.
`run_registry_machine(...)` runs it with a fixed seed (`derandomize`), no example database and
no deadline, so a run is the same in any process.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from scenarios.model_check.agents import SETTLE_SUFFIX, RegistryChild, RegistryRoot
from sim import Simulation
from sim.checkers.models.registries import RegistriesModel

__all__ = ["ModelMismatch", "registry_machine", "run_registry_machine"]

CHILDREN = ("c1", "c2")
KEYS = ("k1", "k2", "k3")
RUN_IDS = ("t1", "t2", "t3")
CRONS = ("* * * * *", "*/5 * * * *", "0 * * * *", "15,45 * * * *", "30 */2 * * * *", "@hourly")
TABLES = ("cf_agents_schedules", "cf_agents_runs", "cf_agents_fibers", "cf_agents_sub_agents")
STEPS_MS = (1, 999, 1_000, 5_000, 29_999, 30_000, 61_000, 300_000)
RELEASE = "0.21.0"
"""The SDK release the machine runs: the one whose tables `TABLES` and the model describe."""


class ModelMismatch(AssertionError):
    """The runtime answered or stored something other than the model says."""


children = st.sampled_from((None, None, *CHILDREN))
fiber_ms = st.sampled_from((0, 1_000, 30_000, 90_000, 600_000))


def registry_machine(
    root: type[RegistryRoot] = RegistryRoot,
    model: type[RegistriesModel] = RegistriesModel,
    seed: int = 0,
) -> type[RuleBasedStateMachine]:
    """The machine class over `root` (a `RegistryRoot`, or a subclass with a planted mistake)
    checked against `model`."""

    class RegistryMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.sim = Simulation(seed=seed, sdk=RELEASE)
            self.root = self.sim.agent(root, "r")
            self.sim.run_for(0)
            self.model = model(root.__name__, "r", RegistryChild.__name__, "ScriptedToolChild")
            self.fibers = 0

        def teardown(self) -> None:
            self.sim.close()

        # -- helpers ----------------------------------------------------------------------------
        def ref(self, child: str | None) -> Any:
            if child is None:
                return self.root
            return self.sim.facet(self.root, RegistryChild, child)

        def call(self, child: str | None, method: str, *args: Any) -> Any:
            return self.sim.call(self.ref(child), method, *args)

        def settle(self) -> None:
            """Let the instant finish (what a call set going at this instant runs), and tell
            the model."""
            self.sim.run_for(0)
            self.model.advance(self.sim.now_ms)

        def expect(self, got: Any, want: Any, what: str) -> None:
            if got != want:
                raise ModelMismatch(
                    f"{what} answered {got!r} at {self.sim.now_ms} ms; the model says {want!r}"
                )

        def present(self, child: str | None) -> bool:
            return child is None or child in self.model.root.children

        def table(self, path: str, name: str) -> list[dict[str, Any]] | None:
            record = self.sim.platform.records.get(path)
            if record is None:
                return None
            try:
                return record.storage.query(f"SELECT * FROM {name}", ())
            except Exception:  # noqa: BLE001 - a table not made yet holds nothing
                return None

        @initialize(
            managed=st.lists(
                st.tuples(st.sampled_from((30_000, 90_000, 600_000)), st.booleans()), max_size=3
            ),
            child=st.booleans(),
        )
        def begin(self, managed: list[tuple[int, bool]], child: bool) -> None:
            """Start from some state: long managed fibers on the root, maybe a sub-agent."""
            for ms, settle in managed:
                self.start_fiber(None, ms, False, "none", None, 0, settle)
            if child:
                self.make_child(CHILDREN[0])

        # -- schedules --------------------------------------------------------------------------
        @rule(
            child=children,
            kind=st.sampled_from(("delayed", "scheduled", "cron", "interval")),
            pick=st.integers(0, 200),
            payload=st.sampled_from((None, {"n": 1}, {"n": 2})),
            idempotent=st.sampled_from((None, True, False)),
        )
        def add_schedule(
            self, child: str | None, kind: str, pick: int, payload: Any, idempotent: Any
        ) -> None:
            if not self.present(child):
                return
            if kind == "delayed":
                value: Any = 1 + pick % 120
            elif kind == "scheduled":
                value = self.sim.now_ms // 1000 + pick % 130 - 5
            elif kind == "cron":
                value = CRONS[pick % len(CRONS)]
            else:
                value = 1 + pick % 90
            if kind == "interval":
                idempotent = None
            want_id, time_s, _ = self.model.schedule(child, kind, value, payload, idempotent)
            got = self.call(child, "add_schedule", kind, value, payload, idempotent)
            what = f"schedule({kind} {value!r}, payload {payload!r}) on {child or 'the root'}"
            self.expect((got["type"], got["time"]), (kind, time_s), what)
            if want_id is not None:
                self.expect(got["id"], want_id, what + " (a duplicate)")
            else:
                if got["id"] in self.model.schedules:
                    raise ModelMismatch(f"{what} reused the id {got['id']} of another row")
                self.model.schedule_made(child, got["id"], kind, value, payload, time_s)

        @rule(child=children, pick=st.integers(0, 20))
        def drop_schedule(self, child: str | None, pick: int) -> None:
            if not self.present(child):
                return
            ids = sorted(self.model.schedules) + ["no-such-id"]
            schedule_id = ids[pick % len(ids)]
            want = self.model.cancel_schedule(child, schedule_id)
            got = self.call(child, "drop_schedule", schedule_id)
            self.expect(got, want, f"cancel_schedule({schedule_id}) on {child or 'the root'}")

        # -- fibers -----------------------------------------------------------------------------
        def fiber_name(self, settle: bool) -> str:
            self.fibers += 1
            return f"f{self.fibers}{SETTLE_SUFFIX if settle else ''}"

        @rule(child=children, ms=fiber_ms, fail=st.booleans())
        def run_fiber(self, child: str | None, ms: int, fail: bool) -> None:
            if not self.present(child):
                return
            name = self.fiber_name(False)
            self.expect(self.call(child, "fiber", name, ms, fail), True, f"run_fiber({name})")
            self.model.run_fiber(child, name, ms, fail)

        @rule(
            child=children,
            ms=fiber_ms,
            fail=st.booleans(),
            id_choice=st.sampled_from(("none", "fresh", "existing")),
            key=st.sampled_from((None, *KEYS)),
            pick=st.integers(0, 20),
            settle=st.booleans(),
        )
        def start_fiber(
            self,
            child: str | None,
            ms: int,
            fail: bool,
            id_choice: str,
            key: str | None,
            pick: int,
            settle: bool,
        ) -> None:
            if not self.present(child):
                return
            name = self.fiber_name(settle)
            fiber_id: str | None = None
            if id_choice == "fresh":
                fiber_id = f"id-{name}"
            elif id_choice == "existing":
                known = sorted({f.id for f in self.model.agent(child).fibers if f.id})
                fiber_id = known[pick % len(known)] if known else f"id-{name}"
            want = self.model.start_fiber(child, name, ms, fail, fiber_id, key)
            got = self.call(child, "managed", name, ms, fail, fiber_id, key)
            what = f"start_fiber({name}, fiber_id={fiber_id!r}, key={key!r})"
            if "error" in want:
                if "error" not in got or not got["error"].startswith(want["error"]):
                    raise ModelMismatch(f"{what} answered {got!r}; the model says {want!r}")
                return
            if want["accepted"] and fiber_id is None:
                want = {**want, "fiber_id": got.get("fiber_id")}
            self.expect(got, want, what)
            if want["accepted"]:
                self.model.fiber_accepted(child, got["fiber_id"], name, ms, fail, key)

        def ledger_id(self, child: str | None, pick: int) -> str:
            known = sorted({f.id for f in self.model.agent(child).fibers if f.id}) + ["no-fiber"]
            return known[pick % len(known)]

        @rule(child=children, pick=st.integers(0, 20), reason=st.sampled_from((None, "stop")))
        def cancel_fiber(self, child: str | None, pick: int, reason: str | None) -> None:
            if not self.present(child):
                return
            fiber_id = self.ledger_id(child, pick)
            want = self.model.cancel_fiber(child, fiber_id, reason)
            self.expect(self.call(child, "cancel", fiber_id, reason), want, f"cancel({fiber_id})")

        @rule(
            child=children,
            pick=st.integers(0, 20),
            status=st.sampled_from(("completed", "error", "aborted", "interrupted")),
        )
        def resolve_fiber(self, child: str | None, pick: int, status: str) -> None:
            if not self.present(child):
                return
            fiber_id = self.ledger_id(child, pick)
            want = self.model.resolve_fiber(child, fiber_id, status)
            got = self.call(child, "resolve", fiber_id, status)
            self.expect(got, want, f"resolve_fiber({fiber_id}, {status})")

        @rule(
            child=children,
            statuses=st.sampled_from(
                (None, ("interrupted",), ("completed", "interrupted"), ("running", "error"), ())
            ),
            limit=st.sampled_from((None, 1, 2)),
        )
        def delete_fibers(self, child: str | None, statuses: Any, limit: int | None) -> None:
            if not self.present(child):
                return
            count, sure, tie = self.model.delete_fibers(child, statuses, limit)
            listed = None if statuses is None else list(statuses)
            got = self.call(child, "forget", listed, limit)
            self.expect(got, count, f"delete_fibers(status={listed}, limit={limit})")
            path = self.model.agent(child).path
            left = {r["fiber_id"] for r in self.table(path, "cf_agents_fibers") or []}
            self.model.fibers_deleted([*sure, *(f for f in tie if f.id not in left)])

        # -- sub-agents -------------------------------------------------------------------------
        @rule(name=st.sampled_from(CHILDREN))
        def make_child(self, name: str) -> None:
            self.expect(self.call(None, "make_child", name), True, f"sub_agent({name})")
            self.model.make_child(name)

        @rule(name=st.sampled_from(CHILDREN))
        def drop_child(self, name: str) -> None:
            self.expect(self.call(None, "drop_child", name), True, f"delete_sub_agent({name})")
            self.model.drop_child(name)

        # -- agent tools ------------------------------------------------------------------------
        @rule(run_id=st.sampled_from(RUN_IDS), ms=fiber_ms, detached=st.booleans())
        def dispatch_tool(self, run_id: str, ms: int, detached: bool) -> None:
            run = self.model.tools.get(run_id)
            if run is not None and not detached and run.hard is None:
                return  # an awaited re-issue of a live run re-attaches: not modelled
            want = self.model.dispatch_tool(run_id, ms, detached)
            what = f"run_agent_tool({run_id}, detached={detached})"
            if want is not None:
                self.expect(self.call(None, "tool", run_id, ms, detached), want, what)
                return
            pending = self.sim.start_call(self.root, "tool", run_id, ms, detached)

            def answer() -> tuple[bool, Any]:
                if not pending.done():
                    return False, None
                event = pending.event
                return True, event.value if event.ok else f"raised {event.value!r}"

            self.model.tools[run_id].answer = answer

        @rule(run_id=st.sampled_from(RUN_IDS))
        def cancel_tool(self, run_id: str) -> None:
            self.call(None, "cancel_tool", run_id)
            self.model.cancel_tool(run_id)

        @rule(status=st.sampled_from((None, "completed", "aborted", "running")))
        def clear_tools(self, status: str | None) -> None:
            rows = self.table(self.model.root.path, "cf_agent_tool_runs") or []
            want = self.model.clear_tools(status, {r["run_id"]: r["status"] for r in rows})
            self.expect(self.call(None, "clear_tools", status), want, f"clear(status={status})")

        # -- the platform -----------------------------------------------------------------------
        @rule(wake_children=st.booleans())
        def evict(self, wake_children: bool) -> None:
            self.sim.evict(self.root)
            self.model.evict()
            self.model.tools_died()
            self.root = self.sim.agent(root, "r")  # a startup: the root's scan runs (§6.1)
            self.settle()
            self.model.recover(None)
            if wake_children:
                for name in sorted(self.model.root.children):
                    self.make_child(name)

        @rule(ms=st.sampled_from(STEPS_MS))
        def advance(self, ms: int) -> None:
            self.sim.run_for(ms)
            self.model.advance(self.sim.now_ms)

        @precondition(lambda self: self.model.schedules)
        @rule()
        def to_next_schedule(self) -> None:
            due = min(row.due_ms for row in self.model.schedules.values())
            self.sim.run_until(max(due, self.sim.now_ms))
            self.model.advance(self.sim.now_ms)

        @invariant()
        def tables_match_the_model(self) -> None:
            self.settle()
            found = self.model.compare(self.table)
            if found:
                raise ModelMismatch(
                    f"at {self.sim.now_ms} ms the tables differ from the model: " + "; ".join(found)
                )

    return RegistryMachine


def run_registry_machine(
    machine: type[RuleBasedStateMachine],
    *,
    examples: int = 20,
    steps: int = 30,
    shrink: bool = True,
) -> None:
    """Run `machine` as a test: `examples` runs of up to `steps` rules, derandomized (a fixed
    seed), with no example database and no deadline. A mismatch raises `ModelMismatch` (shrunk
    to the fewest rules that show it, unless `shrink` is False)."""
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            derandomize=True,
            database=None,
            deadline=None,
            print_blob=False,
            report_multiple_bugs=False,
            phases=[*phases, Phase.shrink] if shrink else phases,
            suppress_health_check=list(HealthCheck),
        ),
    )
