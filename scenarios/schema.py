"""The scenario as data: frozen dataclasses the loader builds and the runner reads.

Nothing here parses or runs anything. A `Scenario` names its agents (`AgentSpec`, the class
already imported and given its options), optional named clients, the `steps` of the safety phase
in order (one dataclass per step kind, each knowing its 1-based `index`, source `line` and optional
`at_ms` / `after_ms` timing), the `expect` list checked after the liveness phase, and the bound of
that phase. Values that came from YAML (arguments, rows, states) are plain Python data.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sim.faults import FaultProfile
from sim.units import HOUR_MS

__all__ = [
    "ACTIONS",
    "DEFAULT_LIVENESS_LIMIT_MS",
    "EVICTION_REASONS",
    "EXPECTATIONS",
    "AgentSpec",
    "ArmStorageFaultStep",
    "CallStep",
    "ClientSpec",
    "ConnectStep",
    "Count",
    "DeployStep",
    "DisconnectStep",
    "EventExpectation",
    "EvictStep",
    "Expectation",
    "QueryExpectation",
    "QuiesceStep",
    "ReconnectStep",
    "RequestStep",
    "RunForStep",
    "RunToNextAlarmStep",
    "RunUntilStep",
    "Scenario",
    "SendStep",
    "StateExpectation",
    "Step",
]

DEFAULT_LIVENESS_LIMIT_MS = HOUR_MS
"""How long the liveness phase may run when the scenario does not say (`liveness: {limit:}`)."""

EVICTION_REASONS = ("idle", "deploy", "alarm-limit", "explicit")
"""Reasons a scenario may give an `evict` step (a `crash` comes from a storage fault instead)."""


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent of the scenario: its alias (also its name on the platform) and its class."""

    alias: str
    class_path: str
    options: dict[str, Any]
    cls: type = field(compare=False, repr=False)
    line: int

    @property
    def path(self) -> str:
        """The agent path the trace uses (`Class/name`)."""
        return f"{self.cls.__name__}/{self.alias}"


@dataclass(frozen=True, kw_only=True)
class ClientSpec:
    """A client declared up front, so that steps can connect it without naming its agent."""

    name: str
    agent: str
    line: int


# -- steps ------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Step:
    """What every step has: its place in the file and when it runs."""

    kind: ClassVar[str] = ""
    index: int
    line: int
    at_ms: int | None = None
    """Absolute sim time to run the step at (the simulation runs until then first)."""
    after_ms: int | None = None
    """Sim time to let pass after the previous step before this one."""

    @property
    def label(self) -> str:
        return f"step {self.index} ({self.kind})"


@dataclass(frozen=True, kw_only=True)
class CallStep(Step):
    """A plain RPC on the agent's stub; `wait: false` starts it and moves on."""

    kind: ClassVar[str] = "call"
    agent: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    wait: bool = True
    expect_error: bool | str = False
    """False: the call must succeed. True: it must fail. A name: it must fail with that class."""


@dataclass(frozen=True, kw_only=True)
class RequestStep(Step):
    """An HTTP request to the agent (a startup trigger), run until it is answered."""

    kind: ClassVar[str] = "request"
    agent: str
    method: str = "GET"
    path: str = "/"
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    """The status the response must have; None accepts any."""
    expect_error: bool | str = False


@dataclass(frozen=True, kw_only=True)
class ConnectStep(Step):
    """Open a WebSocket connection for a named client (again, if it was connected before)."""

    kind: ClassVar[str] = "connect"
    client: str
    agent: str


@dataclass(frozen=True, kw_only=True)
class DisconnectStep(Step):
    kind: ClassVar[str] = "disconnect"
    client: str
    code: int = 1000
    reason: str = "client closed"


@dataclass(frozen=True, kw_only=True)
class ReconnectStep(Step):
    kind: ClassVar[str] = "reconnect"
    client: str


@dataclass(frozen=True, kw_only=True)
class SendStep(Step):
    kind: ClassVar[str] = "send"
    client: str
    message: Any


@dataclass(frozen=True, kw_only=True)
class RunForStep(Step):
    kind: ClassVar[str] = "run_for"
    duration_ms: int


@dataclass(frozen=True, kw_only=True)
class RunUntilStep(Step):
    kind: ClassVar[str] = "run_until"
    until_ms: int


@dataclass(frozen=True, kw_only=True)
class EvictStep(Step):
    kind: ClassVar[str] = "evict"
    agent: str
    reason: str = "explicit"


@dataclass(frozen=True, kw_only=True)
class DeployStep(Step):
    kind: ClassVar[str] = "deploy"


@dataclass(frozen=True, kw_only=True)
class ArmStorageFaultStep(Step):
    """The `skip`+1-th statement matching `match` fails (`error`) or kills the process (`crash`)."""

    kind: ClassVar[str] = "arm_storage_fault"
    agent: str
    fault: str
    match: str | None = None
    skip: int = 0
    count: int = 1


@dataclass(frozen=True, kw_only=True)
class RunToNextAlarmStep(Step):
    kind: ClassVar[str] = "run_to_next_alarm"


@dataclass(frozen=True, kw_only=True)
class QuiesceStep(Step):
    kind: ClassVar[str] = "quiesce"
    limit_ms: int = DEFAULT_LIVENESS_LIMIT_MS


ACTIONS: dict[str, type[Step]] = {
    cls.kind: cls
    for cls in (
        CallStep,
        RequestStep,
        ConnectStep,
        DisconnectStep,
        ReconnectStep,
        SendStep,
        RunForStep,
        RunUntilStep,
        EvictStep,
        DeployStep,
        ArmStorageFaultStep,
        RunToNextAlarmStep,
        QuiesceStep,
    )
}
"""Step kinds by the action key that introduces them in YAML."""


# -- expectations -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Count:
    """How many matching records are allowed: `low` to `high` inclusive (None: no upper bound)."""

    low: int = 1
    high: int | None = None

    def allows(self, n: int) -> bool:
        return n >= self.low and (self.high is None or n <= self.high)

    def describe(self) -> str:
        if self.high == 0:
            return "no"
        if self.low == self.high:
            return f"exactly {self.low}"
        if self.high is None:
            return f"at least {self.low}"
        if self.low == 0:
            return f"at most {self.high}"
        return f"between {self.low} and {self.high}"


@dataclass(frozen=True, kw_only=True)
class Expectation:
    kind: ClassVar[str] = ""
    index: int
    line: int

    @property
    def label(self) -> str:
        return f"expect {self.index} ({self.kind})"


@dataclass(frozen=True, kw_only=True)
class EventExpectation(Expectation):
    """A trace matcher: records named `event` (trailing `*`: a prefix) with these fields."""

    kind: ClassVar[str] = "event"
    event: str
    agent: str | None = None
    """The agent alias; None matches records of any agent and of the platform itself."""
    incarnation: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    count: Count = field(default_factory=Count)
    between_ms: tuple[int, int] | None = None
    """Only records at sim times in [from, to], both included."""


@dataclass(frozen=True, kw_only=True)
class QueryExpectation(Expectation):
    """A SQL query on the agent's committed storage must return exactly these rows."""

    kind: ClassVar[str] = "query"
    agent: str
    sql: str
    params: tuple[Any, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class StateExpectation(Expectation):
    """The agent's persisted state (what `state` reads after eviction) must equal `equals`."""

    kind: ClassVar[str] = "state"
    agent: str
    equals: Any


EXPECTATIONS: dict[str, type[Expectation]] = {
    cls.kind: cls for cls in (EventExpectation, QueryExpectation, StateExpectation)
}


# -- the whole ----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One scenario file, validated: everything the runner needs and nothing it must check."""

    name: str
    description: str
    seed: int
    faults: FaultProfile
    agents: tuple[AgentSpec, ...]
    clients: tuple[ClientSpec, ...] = ()
    steps: tuple[Step, ...]
    expect: tuple[Expectation, ...] = ()
    liveness_limit_ms: int = DEFAULT_LIVENESS_LIMIT_MS
    path: str

    def agent(self, alias: str) -> AgentSpec:
        for spec in self.agents:
            if spec.alias == alias:
                return spec
        raise KeyError(f"scenario {self.name!r} has no agent {alias!r}")

    def replay_command(self, seed: int | None = None) -> str:
        """The one command that runs this scenario again with this seed."""
        return f"agentsim run {shlex.quote(self.path)} --seed {self.seed if seed is None else seed}"
