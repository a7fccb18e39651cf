"""What a hunt draws: faults, fault schedules and the statement sites storage faults aim at.

This is the one place that says how faults are drawn with Hypothesis, shared by `agentsim fuzz`
(`scenarios.hunt.fuzz`, over a scenario file) and by the Hypothesis API
(`scenarios.hunt.strategies`, over agents a Python test drives). It knows nothing of the
scenario language: a target is whatever name the caller acts on (a scenario alias, or
`alias/name` for a sub-agent), a `Fault` is an action name with arguments (`evict`, `deploy`,
`arm_storage_fault`, `reconnect`, `call`, `request`: the scenario language's step kinds, which
are also what `Simulation` offers), and a statement site is read off statements the caller
recorded with `Platform.statement_observer`. The strategies are built from a Hypothesis
`strategies` module passed in, so that importing this module never imports Hypothesis (a test
extra).

How the draw goes: each example first draws which kinds of fault it may use at all (swarm
testing), then one to `max_steps` faults among those kinds, and a seed (the base one or any).
A storage fault draws a group of sites (one statement shape of one agent: the same weight for
the runtime's housekeeping as for the agent's own writes), then one occurrence in it, then is
written as "fail the (skip+1)-th statement matching this shape" on that agent.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scenarios.hunt.statement_shapes import fault_group, shape_pattern, statement_shape
from sim.sqlite import is_write

__all__ = [
    "CodeSite",
    "FAULT_KINDS",
    "MIN_HORIZON_MS",
    "SCRIPTED_EVICTION_REASONS",
    "UPGRADE",
    "SEED_LIMIT",
    "STORAGE_FAULTS",
    "Fault",
    "Schedule",
    "StatementSite",
    "fault_options",
    "fault_place",
    "schedules",
    "site_groups",
    "sites_of",
    "times",
]

FAULT_KINDS = ("evict", "deploy", "storage", "reconnect", "repeat")
"""What a schedule draws by default, by the name `agentsim fuzz --faults` takes. `repeat` sends
one of the scenario's own calls or requests again at a drawn time (a retry, a duplicate
delivery, a re-issue racing recovery), as a user's client would."""
UPGRADE = "upgrade"
"""A kind drawn only when asked for (`--faults ...,upgrade`, `generate --upgrade`): a deploy
that brings a newer SDK release than the run's (`deploy: {sdk: ...}`). It is left out of
`FAULT_KINDS` so that a seed that drew a schedule before draws the same one now: a feature
added to the options would shift every swarm draw."""
STORAGE_FAULTS = ("error", "crash", "crash-after-commit")
"""How a drawn storage fault hits its statement (`crash-after-commit` only on writes)."""
SCRIPTED_EVICTION_REASONS = ("idle", "deploy", "alarm-limit", "explicit")
"""The eviction reasons a step may give (the platform's own `crash`, `destroyed` and `deleted`
come from other causes)."""
MIN_HORIZON_MS = 60_000
SEED_LIMIT = 2**16

T = TypeVar("T")


@dataclass(frozen=True)
class Fault:
    """One drawn step: at `at_ms`, do `action` (a step kind of the scenario language) with
    `args`; or, with `before` set, put it with no `at:` just before that base step (a storage
    fault aimed at a statement of that step: the timeline stays the base run's)."""

    at_ms: int
    action: str
    args: tuple[tuple[str, Any], ...] = ()
    before: int | None = None


def _evict_args(agent: str, reason: str) -> tuple[tuple[str, Any], ...]:
    """A drawn eviction's step fields. A sub-agent the base run wrote with may not exist at the
    drawn time (not opened yet, or deleted): the eviction then does nothing (`if_present`)."""
    args: tuple[tuple[str, Any], ...] = (("agent", agent), ("reason", reason))
    return (*args, ("if_present", True)) if "/" in agent else args


@dataclass(frozen=True)
class Schedule:
    """What Hypothesis draws: the seed of the run and the extra steps. Its repr, and a failing
    example Hypothesis prints, is Python that builds it again (`faults` may be given as a list),
    so that it can be pasted into `@example(...)` with `from sim.strategies import Fault,
    Schedule`."""

    seed: int
    faults: tuple[Fault, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", tuple(self.faults))


class Executed(Protocol):
    """A statement agent code ran, as a recording gives it (`scenarios.run.runner.ExecutedStatement`
    is one)."""

    @property
    def t_ms(self) -> int: ...
    @property
    def agent(self) -> str: ...
    @property
    def statement(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def step(self) -> int: ...


CodeSite = tuple[tuple[str, int], ...]
"""Where code issued a statement: innermost frames outside the platform, as (file, line)."""


@dataclass(frozen=True)
class StatementSite:
    """One statement of the base run, and how a step reaches exactly it."""

    target: str
    """The agent as a step names it: `alias`, or `alias/name/...` for a sub-agent."""
    agent: str
    """Its path in the trace."""
    kind: str
    table: str
    pattern: str
    """The anchored regex of its shape (`match:`)."""
    step: int
    """The 0-based base step during which it ran (the number of steps: the liveness phase)."""
    skip: int
    """Earlier statements of the same target and pattern in that step."""
    t_ms: int
    turn: int
    write: bool
    statement: str
    site: CodeSite = ()
    """Where code issued it (`scenarios.run.runner.ExecutedStatement.site`), when recorded."""

    @property
    def shape(self) -> str:
        return f"{self.kind} {self.table}".strip()


def sites_of(
    statements: Sequence[Executed], target_of: Callable[[str], str | None]
) -> list[StatementSite]:
    """Every recorded statement whose agent path `target_of` can name, in the order they ran,
    with the number of earlier statements of its shape on that target in that step."""
    earlier: dict[tuple[str, int], list[str]] = defaultdict(list)
    counts: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    out = []
    for executed in statements:
        target = target_of(executed.agent)
        if target is None:
            continue
        kind, table = statement_shape(executed.statement)
        pattern = shape_pattern(executed.statement)
        text = " ".join(executed.statement.split())
        key = (target, executed.step)
        matched = counts[key]
        if pattern not in matched:
            # A pattern seen for the first time counts what it matches among earlier ones.
            regex = re.compile(pattern)
            matched[pattern] = sum(1 for before in earlier[key] if regex.search(before))
        out.append(
            StatementSite(
                target=target,
                agent=executed.agent,
                kind=kind,
                table=table,
                pattern=pattern,
                step=executed.step,
                skip=matched[pattern],
                t_ms=executed.t_ms,
                turn=executed.turn,
                write=is_write(executed.statement),
                statement=executed.statement,
                site=getattr(executed, "site", ()),
            )
        )
        for known in matched:
            if re.search(known, text):
                matched[known] += 1
        earlier[key].append(text)
    return out


def site_groups(sites: Sequence[StatementSite]) -> list[list[StatementSite]]:
    """Sites grouped by (agent, fault group, code site), groups in order of first appearance.
    The fault group is the statement's shape, with every schema statement one group
    (`statement_shapes.fault_group`); the code site tells apart one shape issued by different code
    (a recovery's DELETE of a run row and a finished fiber's), so each gets its share of the
    draws. Schema statements have no site: all of them are one step of startup."""
    groups: dict[tuple[object, ...], list[StatementSite]] = {}
    for site in sites:
        groups.setdefault((site.target, *fault_place(site.statement, site.site)), []).append(site)
    return list(groups.values())


def fault_place(statement: str, site: CodeSite) -> tuple[tuple[str, str], CodeSite]:
    """Where a hunt's fault lands, as both hunts group it: the statement's fault group
    (`statement_shapes.fault_group`) and the code site that issued it, except for schema statements,
    which have none (each CREATE is a line of its own, and all of them are one step of
    startup)."""
    group = fault_group(statement)
    return group, () if group == ("schema", "") else site


# -- strategies ---------------------------------------------------------------------------------
def times(st: Any, horizon_ms: int) -> Any:
    """Sim times up to `horizon_ms`: whole seconds as often as any millisecond."""
    return st.one_of(
        st.integers(0, horizon_ms // 1000).map(lambda s: s * 1000), st.integers(0, horizon_ms)
    )


def fault_options(
    st: Any,
    *,
    kinds: Sequence[str],
    at: Any,
    agents: Sequence[str],
    clients: Sequence[str],
    groups: Sequence[Sequence[StatementSite]],
    reasons: Sequence[str] = SCRIPTED_EVICTION_REASONS,
    repeatable: Sequence[T] = (),
    repeat: Callable[[int, T], Fault] | None = None,
    upgrades: Sequence[str] = (),
) -> dict[str, Any]:
    """One strategy of `Fault` per feature a schedule may enable (`evict`, `deploy`,
    `storage:<how>` for each way a storage fault hits, `repeat`, `reconnect`, `upgrade`: a
    deploy bringing one of the releases `upgrades`, newer than the run's), for the kinds asked
    and what there is to act on; a feature with nothing to act on is left out."""
    options: dict[str, Any] = {}
    if UPGRADE in kinds and upgrades:
        options[UPGRADE] = st.builds(
            Fault,
            at,
            st.just("deploy"),
            st.sampled_from(list(upgrades)).map(lambda sdk: (("sdk", sdk),)),
        )
    if "evict" in kinds:
        # Sub-agents too (the ones the base run wrote with): one dying alone while its
        # root lives is a path of its own (a child reset, its leases left in the root).
        subs = sorted({site.target for group in groups for site in group} - set(agents))
        options["evict"] = st.builds(
            Fault,
            at,
            st.just("evict"),
            st.builds(_evict_args, st.sampled_from([*agents, *subs]), st.sampled_from(reasons)),
        )
    if "deploy" in kinds:
        options["deploy"] = st.builds(Fault, at, st.just("deploy"))
    if "storage" in kinds and groups:
        for how in STORAGE_FAULTS:
            usable = [
                [site for site in group if site.write or how != "crash-after-commit"]
                for group in groups
            ]
            usable = [group for group in usable if group]
            if usable:
                options[f"storage:{how}"] = _storage_faults(st, usable, how)
    if "repeat" in kinds and repeatable and repeat is not None:
        options["repeat"] = st.builds(
            repeat, at, st.sampled_from(range(len(repeatable))).map(repeatable.__getitem__)
        )
    if "reconnect" in kinds and clients:
        options["reconnect"] = st.builds(
            Fault,
            at,
            st.just("reconnect"),
            st.tuples(st.tuples(st.just("client"), st.sampled_from(list(clients)))),
        )
    return options


def _storage_faults(st: Any, groups: list[list[StatementSite]], how: str) -> Any:
    """One occurrence of one statement shape of one agent, hit by `how`: a group first
    (uniformly, so every shape gets its share), then an occurrence in it."""

    def fault(site: StatementSite) -> Fault:
        args = (
            ("agent", site.target),
            ("kind", how),
            ("match", site.pattern),
            ("skip", site.skip),
        )
        return Fault(site.t_ms, "arm_storage_fault", args, before=site.step)

    return st.sampled_from(groups).flatmap(lambda group: st.sampled_from(group)).map(fault)


def schedules(st: Any, options: dict[str, Any], *, max_steps: int, base_seed: int) -> Any:
    """Schedules over `options` (from `fault_options`): swarm testing (each example first
    picks which features it may use at all), one to `max_steps` faults, and a seed that is
    `base_seed` or any below `SEED_LIMIT`."""
    features = sorted(options)

    def faults_of(enabled: frozenset[str]) -> Any:
        chosen = [options[name] for name in features if name in enabled]
        return st.lists(st.one_of(chosen), min_size=1, max_size=max_steps)

    swarm = st.frozensets(st.sampled_from(features), min_size=1)
    seeds = st.one_of(st.just(base_seed), st.integers(0, SEED_LIMIT))
    return st.builds(Schedule, seeds, swarm.flatmap(faults_of))
