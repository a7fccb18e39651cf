"""`AgentToolsMixin`: everything an agent needs to run other agents as tools, composed from the
modules of this package (runs and their admission, forwarding, the delivery ledger, detached
runs, re-attach, replay and retention)."""

from __future__ import annotations

from typing import Any

from agents_core.agent_tools.admission import AdmissionMixin
from agents_core.agent_tools.detached import DetachedMixin
from agents_core.agent_tools.forward import ForwardingMixin
from agents_core.agent_tools.ledger import LedgerMixin
from agents_core.agent_tools.reattach import ReattachMixin
from agents_core.agent_tools.retention import RetentionMixin
from agents_core.agent_tools.runs import RunsMixin
from agents_core.self_types import AgentSelf

__all__ = ["AgentToolsMixin"]


class AgentToolsMixin(
    RunsMixin,
    AdmissionMixin,
    ForwardingMixin,
    LedgerMixin,
    DetachedMixin,
    ReattachMixin,
    RetentionMixin,
):
    def report_progress(self: AgentSelf, **progress: Any) -> None:
        """Progress is reported by chat agents running as agent-tool children; on a plain agent
        this is a no-op with a warning."""
        self._log(
            "warn",
            "report_progress is only supported on chat agents running as agent "
            "tools; ignoring on base Agent.",
        )
