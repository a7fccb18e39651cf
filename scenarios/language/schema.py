"""The scenario as data: frozen dataclasses the loader builds and the runner reads.

Nothing here parses or runs anything. A `Scenario` names its agents (`AgentSpec`, the class
already imported, or built from a workload description, and given its options), optional named
clients, the scripted model services (`ModelScript` by service name), the `steps` of the safety
phase in order (one dataclass per step kind, each knowing its 1-based `index`, source `line` and
optional `at_ms` / `after_ms` timing), the `expect` list checked after the liveness phase, and the
bound of that phase. Values that came from YAML (arguments, rows, states) are plain Python data;
model replies are `sim.model` replies, built once and immutable.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from agents_core.releases.registry import DEFAULT_RELEASE
from sim.faults import FaultProfile
from sim.model import Reply, text
from sim.units import HOUR_MS

__all__ = [
    "ACTIONS",
    "DEFAULT_LIVENESS_LIMIT_MS",
    "DEFAULT_MODEL",
    "EVICTION_REASONS",
    "EXPECTATIONS",
    "HOOK_EVENTS",
    "MODEL_SERVICE",
    "AdvanceToNextAlarmStep",
    "AgentSpec",
    "ArmStorageFaultStep",
    "CallSelector",
    "CallStep",
    "ClientFramesExpectation",
    "ClientRunExpectation",
    "ClientSpec",
    "ConnectStep",
    "Count",
    "DeployAllStep",
    "DeployStep",
    "DisconnectStep",
    "EventExpectation",
    "EvictStep",
    "Expectation",
    "FailModelStep",
    "HookExpectation",
    "InterleaveSetting",
    "InvariantsExpectation",
    "ModelRule",
    "ModelScript",
    "OrderExpectation",
    "ProbesExpectation",
    "QueryExpectation",
    "QuiesceStep",
    "ReconnectStep",
    "RecordMatcher",
    "RequestStep",
    "RescriptModelStep",
    "RunForStep",
    "RunInStep",
    "RunToNextAlarmStep",
    "RunUntilStep",
    "Scenario",
    "SendStep",
    "StallModelStep",
    "StateExpectation",
    "Step",
    "StorageExpectation",
    "TimingExpectation",
]

DEFAULT_LIVENESS_LIMIT_MS = HOUR_MS
"""How long the liveness phase may run when the scenario does not say (`liveness: {limit:}`)."""

EVICTION_REASONS = ("idle", "deploy", "alarm-limit", "explicit")
"""Reasons a scenario may give an `evict` step (a `crash` comes from a storage fault instead)."""


MODEL_SERVICE = "model"
"""The upstream service chat agents stream from unless they have a model of their own."""


@dataclass(frozen=True)
class ModelRule:
    """Requests for which every given predicate holds get `replies` (the first match the first
    reply, the second the second, every later one the last)."""

    replies: tuple[Reply, ...]
    asked: str | None = None
    """The last user message contains this text."""
    offers: str | None = None
    """The request offers this tool."""
    after_tool: str | bool | None = None
    """The model is called back with a settled tool result (of this tool, or any: True)."""
    continuing: bool | None = None
    """Chat recovery is continuing an interrupted answer."""


@dataclass(frozen=True)
class ModelScript:
    """A scripted model provider: rules in order, then the default replies."""

    rules: tuple[ModelRule, ...] = ()
    default: tuple[Reply, ...] = (text("ok"),)


DEFAULT_MODEL = ModelScript()
"""The model every scenario has when it declares none: it answers 'ok' to everything."""


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent of the scenario: its alias (also its name on the platform) and its class."""

    alias: str
    class_path: str
    options: dict[str, Any]
    cls: type = field(compare=False, repr=False)
    line: int
    workload: str | None = None
    """The built-in workload the class was built from (`fibers`, `tools`, `chat`), or None."""

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
    may_fail_with: str | None = None
    """A class name: the call may also fail with it (a fault a hunt inserted can refuse it)."""
    checks_return: bool = False
    """Whether the file gave `returns:` (which may itself be null)."""
    returns: Any = None
    """What the call must return, compared as JSON (when `checks_return`)."""


@dataclass(frozen=True, kw_only=True)
class RunInStep(Step):
    """A function of the user's run against the agent's live instance (`Simulation.run_in`):
    a delivery on its stub, whose writes commit as a turn."""

    kind: ClassVar[str] = "run_in"
    agent: str
    function: str
    """`package.module:name`, as the file gives it."""
    fn: Any = field(default=None, compare=False, repr=False)
    """The function itself, imported when the file was read."""
    expect_error: bool | str = False
    checks_return: bool = False
    returns: Any = None


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
    may_fail_with: str | None = None
    """A class name: the request may also fail with it (as a call's)."""


@dataclass(frozen=True, kw_only=True)
class ConnectStep(Step):
    """Open a WebSocket connection for a named client (again, if it was connected before)."""

    kind: ClassVar[str] = "connect"
    client: str
    agent: str
    may_fail_with: str | None = None
    """An error class the connection may be refused with (a fault the hunt drew kills the
    agent it connects to); otherwise it must open."""


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
    may_fail_with: str | None = None
    """As `connect`'s."""


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
    child: tuple[str, ...] = ()
    """Sub-agent names below `agent`, outermost first: the sub-agent to evict (an agent-tool
    child is named by its run id); empty evicts the agent itself."""
    child_class: str | None = None
    """The class name the (last) sub-agent must have; None: whichever has that name."""
    if_present: bool = False
    """A sub-agent that does not exist then (not opened yet, or deleted) is left alone instead
    of failing the step (the faults a hunt draws are written so)."""

    @property
    def target(self) -> str:
        """`parent/r1`: how failures name the evicted agent."""
        return "/".join((self.agent, *self.child))


@dataclass(frozen=True, kw_only=True)
class DeployStep(Step):
    """Every live incarnation restarts; with `sdk`, on that SDK release (an upgrade: every
    incarnation that starts after it runs the new release on the stored state)."""

    kind: ClassVar[str] = "deploy"
    sdk: str | None = None
    """The release the deploy brings (None: the release deployed now)."""


@dataclass(frozen=True, kw_only=True)
class DeployAllStep(DeployStep):
    """The same as `deploy` (every live incarnation restarts), under the issue's name."""

    kind: ClassVar[str] = "deploy_all"


@dataclass(frozen=True, kw_only=True)
class ArmStorageFaultStep(Step):
    """The `skip`+1-th statement matching `match` fails (`error`), kills the process just
    before it (`crash`) or right after its turn commits (`crash-after-commit`)."""

    kind: ClassVar[str] = "arm_storage_fault"
    agent: str
    fault: str
    match: str | None = None
    skip: int = 0
    count: int = 1
    child: tuple[str, ...] = ()
    """Sub-agent names below `agent` whose storage is meant (armed when it is created, if it
    does not exist yet); empty: the agent's own storage."""
    child_class: str | None = None

    @property
    def target(self) -> str:
        return "/".join((self.agent, *self.child))


@dataclass(frozen=True, kw_only=True)
class RunToNextAlarmStep(Step):
    kind: ClassVar[str] = "run_to_next_alarm"


@dataclass(frozen=True, kw_only=True)
class AdvanceToNextAlarmStep(RunToNextAlarmStep):
    """The same as `run_to_next_alarm`, under the issue's name."""

    kind: ClassVar[str] = "advance_to_next_alarm"


@dataclass(frozen=True, kw_only=True)
class RescriptModelStep(Step):
    """From now on, the model service answers every request with `reply` (the next `times`
    requests only, when given; then its script again)."""

    agent: str | None = None
    """The chat workload whose own model this is; None for the scenario's `model:`."""
    service: str = MODEL_SERVICE
    reply: Reply
    times: int | None = None


@dataclass(frozen=True, kw_only=True)
class StallModelStep(RescriptModelStep):
    kind: ClassVar[str] = "stall_model"
    duration_ms: int


@dataclass(frozen=True, kw_only=True)
class FailModelStep(RescriptModelStep):
    kind: ClassVar[str] = "fail_model"
    message: str


@dataclass(frozen=True, kw_only=True)
class QuiesceStep(Step):
    kind: ClassVar[str] = "quiesce"
    limit_ms: int = DEFAULT_LIVENESS_LIMIT_MS


ACTIONS: dict[str, type[Step]] = {
    cls.kind: cls
    for cls in (
        CallStep,
        RunInStep,
        RequestStep,
        ConnectStep,
        DisconnectStep,
        ReconnectStep,
        SendStep,
        RunForStep,
        RunUntilStep,
        EvictStep,
        DeployStep,
        DeployAllStep,
        ArmStorageFaultStep,
        RunToNextAlarmStep,
        AdvanceToNextAlarmStep,
        StallModelStep,
        FailModelStep,
        QuiesceStep,
    )
}
"""Step kinds by the action key that introduces them in YAML."""


# -- expectations -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CallSelector:
    """Which call steps a `per_accepted_call` count is relative to: every call of `method`
    (on the agent `agent`, or on any agent when None), those a hunt inserted included."""

    method: str
    agent: str | None = None

    def selects(self, step: CallStep) -> bool:
        return step.method == self.method and self.agent in (None, step.agent)

    def describe(self) -> str:
        return f"{self.agent}.{self.method}" if self.agent is not None else self.method


@dataclass(frozen=True)
class Count:
    """How many matching records are allowed: `low` to `high` inclusive (None: no upper bound).
    With `per_call`, the bounds are per call the run accepted: `for_calls` gives the count a
    run's calls allow."""

    low: int = 1
    high: int | None = None
    per_call: CallSelector | None = None

    def allows(self, n: int) -> bool:
        return n >= self.low and (self.high is None or n <= self.high)

    def for_calls(self, accepted: int, refused: int) -> Count:
        """The absolute count `accepted` returned calls and `refused` failed (or unfinished)
        ones allow. A refused call may have taken effect before its caller was told it failed
        (a crash just after the commit) or not at all, so it adds from none to `high`."""
        high = None if self.high is None else self.high * (accepted + refused)
        return Count(self.low * accepted, high)

    def per_call_note(self, accepted: int, refused: int) -> str:
        """` (1 per accepted call of charge: 3 returned, 1 refused)`, or nothing."""
        if self.per_call is None:
            return ""
        each = Count(self.low, self.high).describe().replace("exactly ", "")
        return (
            f" ({each} per accepted call of {self.per_call.describe()}: {accepted} returned, "
            f"{refused} refused)"
        )

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
    always: bool = False
    """`always: true`: it holds whatever faults a hunt injects, so `fuzz --invariants-only`
    and `explore` keep it where they drop a story's other expectations."""
    sdk: str | None = None
    """`sdk: "0.21.0"`: checked only on a run that starts on that release (None: on any)."""

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
    contains: dict[str, Any] = field(default_factory=dict)
    """Fields whose values must contain these (`scenarios.run.records.contains`): a subset match
    at any depth, where `fields` compares whole values."""
    count: Count = field(default_factory=Count)
    between_ms: tuple[int, int] | None = None
    """Only records at sim times in [from, to], both included."""


@dataclass(frozen=True, kw_only=True)
class StorageExpectation(Expectation):
    """What reads an agent's final storage: the agent, or a sub-agent below it."""

    agent: str
    child: tuple[str, ...] = ()
    """Sub-agent names below `agent`, outermost first (`agent: parent/r1`); empty: the agent
    itself."""
    child_class: str | None = None
    """The class name the (last) sub-agent must have; None: whichever has that name."""

    @property
    def target(self) -> str:
        """`parent/r1`: how failures name the agent read."""
        return "/".join((self.agent, *self.child))


@dataclass(frozen=True, kw_only=True)
class QueryExpectation(StorageExpectation):
    """A SQL query on the agent's committed storage must return exactly these rows."""

    kind: ClassVar[str] = "query"
    sql: str
    params: tuple[Any, ...] = ()
    rows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class StateExpectation(StorageExpectation):
    """The agent's persisted state (what `state` reads after eviction) must equal `equals`."""

    kind: ClassVar[str] = "state"
    equals: Any


@dataclass(frozen=True, kw_only=True)
class InvariantsExpectation(Expectation):
    """Named invariants of `sim.checkers` that must hold after the liveness phase."""

    kind: ClassVar[str] = "invariants"
    names: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ProbesExpectation(Expectation):
    """Probes (`sim.probes`) the run must have reached, each at least once: the story's rare
    path was really taken."""

    kind: ClassVar[str] = "probes"
    names: tuple[str, ...]


HOOK_EVENTS = {
    "on_finish": "hook:on_finish",
    "on_agent_tool_finish": "hook:on_agent_tool_finish",
    "delivered": "hook:delivered",
    "workload_on_finish": "workload:on_finish",
}
"""Hook names a `hook:` expectation counts, and the trace record each one is."""


@dataclass(frozen=True, kw_only=True)
class HookExpectation(Expectation):
    """How many times a finish hook ran (for a run, a slot, a status)."""

    kind: ClassVar[str] = "hook"
    hook: str
    agent: str | None = None
    run: str | None = None
    slot: str | None = None
    status: str | None = None
    count: Count = field(default_factory=Count)

    @property
    def event(self) -> str:
        return HOOK_EVENTS[self.hook]


@dataclass(frozen=True, kw_only=True)
class RecordMatcher:
    """One trace record to find: its event (trailing `*`: a prefix), where and what fields."""

    event: str
    agent: str | None = None
    incarnation: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    contains: dict[str, Any] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class OrderExpectation(Expectation):
    """Records matching each matcher exist in this order (a subsequence of the trace)."""

    kind: ClassVar[str] = "order"
    matchers: tuple[RecordMatcher, ...]


@dataclass(frozen=True, kw_only=True)
class TimingExpectation(Expectation):
    """How far apart records are in sim time. For each record matching `first`, the next
    record after it (in trace order) matching `then` must come within `within_ms` (and exist),
    and no sooner than `at_least_ms` (when it exists). Without `then`, the gaps between
    consecutive records matching `first` are checked (the last has no next one)."""

    kind: ClassVar[str] = "timing"
    first: RecordMatcher
    then: RecordMatcher | None = None
    within_ms: int | None = None
    at_least_ms: int | None = None


@dataclass(frozen=True, kw_only=True)
class ClientFramesExpectation(Expectation):
    """How many frames a client received of a type (an `agent-tool-event` of a kind, a run)."""

    kind: ClassVar[str] = "client"
    client: str
    agent: str
    """The alias of the agent the client connects to."""
    type: str | None = None
    event_kind: str | None = None
    run: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    count: Count = field(default_factory=Count)


@dataclass(frozen=True, kw_only=True)
class ClientRunExpectation(Expectation):
    """What a client shows for a run once every frame it received went through the reducer
    (`AgentToolEvents`) once: `status`, `text`, `summary`, `error`, `reason`, `milestones`
    (names, in order), `progress` (these fields of it)."""

    kind: ClassVar[str] = "client"
    client: str
    agent: str
    run: str
    reduced: dict[str, Any]


EXPECTATIONS: dict[str, type[Expectation]] = {
    cls.kind: cls
    for cls in (
        EventExpectation,
        QueryExpectation,
        StateExpectation,
        InvariantsExpectation,
        HookExpectation,
        OrderExpectation,
        TimingExpectation,
        ClientFramesExpectation,
    )
}


# -- the whole ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class InterleaveSetting:
    """`interleave:`: which same-instant groups of timers run out of FIFO order
    (`sim.interleave`). Either `points` (group numbers, from 1) or `depth` (that many points
    drawn by the seed among the groups the run has in FIFO order)."""

    seed: int
    points: tuple[int, ...] | None = None
    depth: int | None = None


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
    liveness_settles: bool = True
    """Whether the liveness phase must go quiet within its limit (a busy end fails the run);
    `liveness: {settles: false}` says a busy end is intended (a cron job, say)."""
    interleave: InterleaveSetting | None = None
    """Same-instant timers in an order the seed chooses (None: FIFO at every instant)."""
    limits: dict[str, int | float] = field(default_factory=dict)
    """The run budgets the file sets (`limits:`), by `sim.budget.RunBudget` field name."""
    path: str
    models: dict[str, ModelScript] = field(default_factory=lambda: {MODEL_SERVICE: DEFAULT_MODEL})
    """Scripted model services by name: `model` (the `model:` section, or one that answers
    'ok'), and `model/<alias>` for a chat workload with a model of its own."""
    sdk: str = DEFAULT_RELEASE
    """The SDK release the run's agents start on: the file's `sdk:`, the command line's
    `--sdk` over it (`on_release`), or the default release."""
    sdk_in_file: str | None = None
    """The release the file's own `sdk:` names (None: the file names none)."""

    def on_release(self, sdk: str | None) -> Scenario:
        """This scenario run on release `sdk` (the command line's `--sdk`; None: as the file
        says). The name is not checked here: the loader and `Simulation` refuse an unknown
        one."""
        return self if sdk is None or sdk == self.sdk else replace(self, sdk=sdk)

    @property
    def sdk_overridden(self) -> bool:
        """Whether the run's release is not the one the file alone gives (so a replay of it
        must name it with `--sdk`)."""
        return self.sdk != (self.sdk_in_file or DEFAULT_RELEASE)

    def agent(self, alias: str) -> AgentSpec:
        for spec in self.agents:
            if spec.alias == alias:
                return spec
        raise KeyError(f"scenario {self.name!r} has no agent {alias!r}")

    def replay_command(self, seed: int | None = None) -> str:
        """The one command that runs this scenario again with this seed."""
        command = (
            f"agentsim run {shlex.quote(self.path)} --seed {self.seed if seed is None else seed}"
        )
        return f"{command} --sdk {self.sdk}" if self.sdk_overridden else command
