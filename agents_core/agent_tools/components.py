"""`AgentTools`: the parent side of agents as tools, built as components in dependency order.

Each component owns its part of the state and reaches the others only through their public
methods (docs/architecture.md):

- `RunStore` (`run_store.py`): the rows of `cf_agent_tool_runs` and the children they name;
- `DeliveryLedger` (`ledger.py`): the `finish` and `give_up` slots of every run, their claims and
  delivered marks, and the handlers a delivery calls;
- `MilestoneNotifier` (`notify.py`): the at-most-once milestone notifications;
- `StreamForwarder` (`forward.py`): a child's tail forwarded to the parent's clients;
- `Admission` (`admission.py`): a new run's row and the concurrency cap;
- `DetachedBackbone` (`backbone.py`): the reconcile tick of detached runs, budgets and give-up;
- `DetachedRuns` (`detached.py`): a detached dispatch, its fast path, and cancel;
- `StoredChunkReplay` (`stored_replay.py`): a child's stored chunks sent again, and where a
  re-attach numbers from;
- `Reattach` (`reattach.py`): re-attaching to a child still running;
- `RecoverySweep` (`recovery_sweep.py`): the startup sweep of awaited runs and its retry;
- `Retention` (`retention.py`): replay on connect, lookup and clear;
- `AgentToolRuns` (`runs.py`): `run_agent_tool` itself.

Each is built after everything it calls, so no component holds one built later: the order of
construction below is the order of dependency. In the SDK all of this is methods of `Agent`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents_core.agent_tools.admission import Admission
from agents_core.agent_tools.backbone import DetachedBackbone
from agents_core.agent_tools.delivery_policy import FULL_DELIVERY, EventDeliveryPolicy
from agents_core.agent_tools.detached import DetachedRuns
from agents_core.agent_tools.forward import StreamForwarder
from agents_core.agent_tools.ledger import DeliveryLedger
from agents_core.agent_tools.notify import MilestoneNotifier
from agents_core.agent_tools.reattach import Reattach
from agents_core.agent_tools.recovery_sweep import RecoverySweep
from agents_core.agent_tools.retention import Retention
from agents_core.agent_tools.run_store import RunStore
from agents_core.agent_tools.runs import AgentToolRuns
from agents_core.agent_tools.stored_replay import StoredChunkReplay

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.context import AgentContext
    from agents_core.keep_alive import KeepAlive
    from agents_core.lifecycle import Lifecycle

__all__ = ["AgentTools"]


class AgentTools:
    """One agent's agent-tool components (one per agent instance, so per incarnation)."""

    __slots__ = (
        "_ctx",
        "store",
        "ledger",
        "notifier",
        "forwarder",
        "admission",
        "backbone",
        "detached",
        "replay",
        "reattach",
        "sweep",
        "retention",
        "runs",
    )

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        *,
        lifecycle: Lifecycle,
        keep_alive: KeepAlive,
        delivery: EventDeliveryPolicy = FULL_DELIVERY,
        replay: type[StoredChunkReplay] = StoredChunkReplay,
    ) -> None:
        """`delivery`: how chunks reach the parent's clients; `replay`: how stored chunks are
        sent again (each the release's rule)."""
        self._ctx = ctx
        self.store = store = RunStore(ctx, agent)
        self.ledger = ledger = DeliveryLedger(ctx, agent, store)
        self.notifier = notifier = MilestoneNotifier(ctx, agent)
        self.forwarder = forwarder = StreamForwarder(ctx, agent, store, notifier, delivery)
        self.admission = admission = Admission(ctx, agent, store)
        self.backbone = backbone = DetachedBackbone(ctx, agent, store, ledger, notifier, lifecycle)
        self.detached = detached = DetachedRuns(
            ctx, agent, store, ledger, backbone, forwarder, notifier
        )
        self.replay = stored = replay(ctx, agent, store, delivery)
        self.reattach = reattach = Reattach(ctx, agent, store, ledger, forwarder, stored)
        self.sweep = RecoverySweep(ctx, agent, store, ledger, backbone, reattach, keep_alive)
        self.retention = Retention(ctx, agent, store, stored)
        self.runs = AgentToolRuns(
            ctx, agent, store, ledger, admission, backbone, detached, forwarder, reattach, delivery
        )

    # -- startup (the Lifecycle runs these around the user's on_start) ------------------------
    def note_runs_for_recovery(self) -> None:
        """Before `on_start`: the runs live at startup are the ones the sweep will recover."""
        self.sweep.collect_runs()

    def after_on_start(self) -> None:
        """After `on_start`: start the sweep of those runs, and arm the redelivery of the hooks
        an earlier incarnation owed (the backbone is armed by the sweep's end when it runs)."""
        sweeping = bool(self.sweep.snapshot)
        self.sweep.schedule()
        self._ctx.host.tasks.wait_until(self.backbone.arm_hook_redelivery(sweeping=sweeping))
