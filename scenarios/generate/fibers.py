"""The `fibers` area: a `fibers` workload with drawn fibers.

`run_fiber` and `start_fiber` (managed) fibers, with and without idempotency keys, that stash
or not, fail at a drawn step, are cancelled by a call or by a deadline, and are recovered by
`resume`, `drop` or `throw` (per agent or per fiber); a keepAlive heartbeat and the recovery's
maximum age are tuned; keepAlive leases are also taken by hand (`hold`), nested, around work
that may raise, their disposers called once or twice. Starts are called again (duplicate
starts), and cancels and deadlines are drawn to land on a step's end exactly, a millisecond
either side, or anywhere.
"""

from __future__ import annotations

from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.parts import Part, Use, call
from scenarios.generate.schedules import SUB_AGENT_NAMES
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.emit import format_duration
from sim.units import parse_duration_ms

__all__ = ["fibers_part"]

RECOVERIES = ("resume", "drop", "throw")


def _fiber(
    st: Any, draw: Any, name: str, alias: str, heartbeat: int, surface: Surface
) -> tuple[dict, list, int]:
    steps = draw(st.integers(1, 5))
    step_ms = draw(aligned(st, [heartbeat, 1000], 1000, 120_000))
    entry: dict[str, Any] = {"name": name, "steps": steps, "step": format_duration(step_ms)}
    managed = draw(st.booleans())
    api = "start_fiber" if managed else "run_fiber"
    uses = [Use(api, "plain", alias, "fiber:run:started")]
    if not draw(st.booleans()):
        entry["stash"] = False
    else:
        uses.append(Use("stash", "after each step", alias, "workload:stashed"))
        size = (
            draw(st.sampled_from((0, 0, 1_000, 100_000)))
            if surface.opens("fibers", "stash_bytes")
            else 0
        )
        if size:
            entry["stash_bytes"] = size
            uses.append(Use("stash", f"{size} bytes", alias, "workload:stashed"))
    if draw(st.integers(0, 3)) == 0:
        entry["fail_at"] = draw(st.integers(1, steps))
        uses.append(Use(api, "body raises", alias, "fiber:run:failed"))
    if managed:
        entry["managed"] = True
        if draw(st.booleans()):
            entry["idempotency_key"] = f"key-{name}"
            uses.append(Use("start_fiber", "idempotency_key", alias, "fiber:run:started"))
        if draw(st.booleans()):
            deadline = draw(aligned(st, [step_ms, heartbeat], 1000, steps * step_ms + 2000))
            entry["deadline"] = format_duration(-(-deadline // 1000) * 1000)
            uses.append(Use("cancel_fiber", "by a deadline", alias, "workload:cancel"))
    if draw(st.integers(0, 3)) == 0:
        entry["recovery"] = draw(st.sampled_from(RECOVERIES))
    return entry, uses, steps * step_ms


LIST_STATUSES: tuple[Any, ...] = (
    None,
    "completed",
    "running",
    "aborted",
    "interrupted",
    "pending",
    ["completed", "aborted"],
    [],
)
"""The status filters a `listing` call draws: none, one status, two, and the empty list."""


def fibers_part(
    st: Any, alias: str, surface: Surface = FULL, facets: tuple[tuple[str, ...], ...] = ()
) -> Any:
    """A strategy of `Part`: one `fibers` agent named `alias`, using only the methods and plan
    fields `surface` keeps open. `facets`: the sub-agent lists the agent always draws one of
    (the `facets` area), whose closes may come at any time, before an open or twice, and
    which take keepAlive by hand themselves; without, it draws sub-agents now and then."""

    @st.composite
    def part(draw: Any) -> Part:
        heartbeat = draw(st.sampled_from((1000, 2000, 5000, 30_000)))
        count = draw(st.integers(1, 3))
        fibers, uses, horizon = [], [], 0
        for index in range(count):
            entry, used, busy = _fiber(st, draw, f"f{index + 1}", alias, heartbeat, surface)
            fibers.append(entry)
            uses += used
            horizon = max(horizon, busy)
        agent: dict[str, Any] = {"workload": "fibers"}
        start = draw(st.sampled_from(("on_start", "call")))
        if start == "call":
            agent["start"] = "call"
        agent["keep_alive_interval"] = format_duration(heartbeat)
        uses.append(Use("keep_alive", "interval", alias, "keep_alive:acquire"))
        recovery = draw(st.sampled_from(RECOVERIES))
        if recovery != "resume":
            agent["recovery"] = recovery
        recoveries = {recovery, *(f.get("recovery", recovery) for f in fibers)}
        evidence = {"resume": "workload:resumed", "drop": "workload:dropped"}
        for name in sorted(recoveries):
            event = evidence.get(name, "fiber:recovery:failed")
            uses.append(Use("on_fiber_recovered", name, alias, event))
        if "throw" in recoveries or draw(st.booleans()):
            # A poison row is retried until it ages out: a drawn age keeps the run short.
            age = draw(aligned(st, [heartbeat], 1000, 600_000))
            agent["options"] = {"fiber_recovery_max_age_ms": format_duration(age)}
            uses.append(Use("fiber_recovery", "max_age_ms", alias, "fiber:recovery:skipped"))
            horizon += age
        agent["fibers"] = fibers
        steps = [call(0, alias, "status")]
        if start == "call":
            steps.append(call(0, alias, "start"))
        periods = [heartbeat, *(parse_duration_ms(f["step"]) for f in fibers)]
        for fiber in draw(st.lists(st.sampled_from(fibers), max_size=2)):
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            steps.append(call(at, alias, "start", fiber["name"]))
            uses.append(Use("start", "again (duplicate)", alias, "rpc"))
        managed = [fiber for fiber in fibers if fiber.get("managed")]
        if managed:
            for fiber in draw(st.lists(st.sampled_from(managed), max_size=2)):
                at = draw(aligned(st, periods, 0, max(horizon, 1000)))
                steps.append(call(at, alias, "cancel", fiber["name"]))
                uses.append(Use("cancel_fiber", "by a call", alias, "workload:cancel"))
            resolved = managed if surface.opens("fibers", "resolve") else []
            for fiber in draw(st.lists(st.sampled_from(resolved), max_size=1)) if resolved else []:
                at = draw(aligned(st, periods, 0, max(horizon, 1000)))
                steps.append(call(at, alias, "resolve", fiber["name"]))
                uses.append(Use("resolve_fiber", "by a call", alias, "rpc"))
        keyed = [fiber for fiber in fibers if fiber.get("idempotency_key")]
        keyed = keyed if surface.opens("fibers", "start_again") else []
        for fiber in draw(st.lists(st.sampled_from(keyed), max_size=2)) if keyed else []:
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            steps.append(call(at, alias, "start_again", fiber["name"]))
            uses.append(Use("start_fiber", "same key again", alias, "rpc"))
        if surface.opens("fibers", "forget") and draw(st.integers(0, 3)) == 0:
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            status = draw(st.sampled_from((None, "completed", "aborted")))
            # Settled before an instant drawn on a step's boundary (a fiber's end) or beside it.
            before = draw(st.one_of(st.none(), aligned(st, periods, 0, max(horizon, 1000))))
            limit = draw(st.sampled_from((None, 1, 2)))
            args = [status, before, limit]
            while args and args[-1] is None:  # given as far as the last one set (0 included)
                args.pop()
            steps.append(call(at, alias, "forget", *args))
            uses.append(Use("delete_fibers", status or "every status", alias, "workload:deleted"))
            if before is not None:
                uses.append(Use("delete_fibers", "settled_before", alias, "workload:deleted"))
            if limit:
                uses.append(Use("delete_fibers", "limit", alias, "workload:deleted"))
        keyed_as = keyed if surface.opens("fibers", "start_as") else []
        for fiber in draw(st.lists(st.sampled_from(keyed_as), max_size=2)) if keyed_as else []:
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            fiber_id = draw(st.sampled_from(("x1", "x2")))
            steps.append(call(at, alias, "start_as", fiber["name"], fiber_id))
            uses.append(Use("start_fiber", "explicit fiber_id", alias, "workload:listed"))
        listed = [f["name"] for f in fibers] if surface.opens("fibers", "listing") else []
        for _ in range(draw(st.integers(0, 2)) if listed else 0):
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            status = draw(st.sampled_from(LIST_STATUSES))
            name = draw(st.sampled_from((None, "", *listed)))
            limit = draw(st.sampled_from((None, 1, 2, 0, 101)))
            steps.append(call(at, alias, "listing", status, name, limit))
            for option, given in (("status", status is not None), ("name", bool(name))):
                if given:
                    uses.append(Use("list_fibers", option, alias, "workload:listed"))
            if limit is not None:
                uses.append(Use("list_fibers", "limit", alias, "workload:listed"))
        waited = managed if surface.opens("fibers", "start_waiting") else []
        for fiber in draw(st.lists(st.sampled_from(waited), max_size=1)) if waited else []:
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            steps.append(call(at, alias, "start_waiting", fiber["name"]))
            uses.append(Use("start_fiber", "wait_for_completion", alias, "workload:waited"))
        if facets:
            names = draw(st.sampled_from(facets))
            horizon = _sub_agents(
                st, draw, alias, agent, periods, steps, uses, horizon, names, loose=True
            )
            for _ in range(draw(st.integers(0, 3))):
                horizon = _hold(st, draw, alias, periods, heartbeat, steps, uses, horizon, names)
        elif surface.opens("fibers", "open") and not draw(st.integers(0, 2)):
            names = draw(st.sampled_from(SUB_AGENT_NAMES))
            horizon = _sub_agents(st, draw, alias, agent, periods, steps, uses, horizon, names)
        held = surface.opens("fibers", "hold")
        for _ in range(draw(st.integers(0, 2)) if held else 0):
            horizon = _hold(st, draw, alias, periods, heartbeat, steps, uses, horizon)
        if surface.opens("fibers", "connect_mcp") and draw(st.booleans()):
            # MCP servers come and go by calls; startup restores them before recovery (F-65).
            added = draw(st.lists(st.sampled_from(MCP_SERVERS), min_size=1, max_size=2))
            for server in added:
                at = draw(aligned(st, periods, 0, max(horizon, 1000)))
                steps.append(call(at, alias, "connect_mcp", server))
                uses.append(Use("add_mcp_server", "by a call", alias, "workload:mcp_added"))
            for server in draw(st.lists(st.sampled_from(added), max_size=1)):
                at = draw(aligned(st, periods, 0, max(horizon, 1000)))
                steps.append(call(at, alias, "disconnect_mcp", server))
                uses.append(Use("remove_mcp_server", "by a call", alias, "workload:mcp_removed"))
        return Part({alias: agent}, tuple(steps), uses=tuple(uses), horizon_ms=horizon)

    return part()


def _hold(
    st: Any,
    draw: Any,
    alias: str,
    periods: list[int],
    heartbeat: int,
    steps: list[Any],
    uses: list[Use],
    horizon: int,
    names: tuple[str, ...] = (),
) -> int:
    """keepAlive taken by hand, outside any fiber (by the agent, or with `names` by one of
    those sub-agents, whose leases the root keeps under its path): nested leases, a work that
    ends on a heartbeat exactly or beside it, that may raise, disposers called twice; the
    horizon the run needs then."""
    at = draw(aligned(st, periods, 0, max(horizon, 1000)))
    ms = draw(aligned(st, [heartbeat], 0, 4 * heartbeat))
    depth, fail, twice = draw(st.integers(1, 3)), draw(st.booleans()), draw(st.booleans())
    if names:
        steps.append(
            call(at, alias, "hold_in", draw(st.sampled_from(names)), ms, depth, fail, twice)
        )
        uses.append(Use("keep_alive", "by hand in a sub-agent", alias, "workload:held"))
    else:
        steps.append(call(at, alias, "hold", ms, depth, fail, twice))
        uses.append(Use("keep_alive", "by hand", alias, "workload:held"))
    if depth > 1:
        uses.append(Use("keep_alive", "nested", alias, "workload:held"))
    if fail:
        uses.append(Use("keep_alive_while", "raises", alias, "workload:held"))
    if twice:
        uses.append(Use("keep_alive", "disposer called twice", alias, "workload:held"))
    return max(horizon, at + ms)


def _sub_agents(
    st: Any,
    draw: Any,
    alias: str,
    agent: dict[str, Any],
    periods: list[int],
    steps: list[Any],
    uses: list[Use],
    horizon: int,
    names: tuple[str, ...],
    loose: bool = False,
) -> int:
    """Sub-agents `names` running the agent's fibers: each opened in the first ten seconds (its
    fibers start then), some closed (deleted with their fibers) and opened again under the same
    name; the horizon the run needs then (a sub-agent's fibers, from its last opening). The
    closes come at any time, before an open too; `loose`: up to three, a name maybe twice."""
    agent["sub_agents"] = list(names)
    busy = max(parse_duration_ms(f["step"]) * int(f["steps"]) for f in agent["fibers"])
    span = max(horizon, 1000)
    for name in names:
        at = draw(aligned(st, periods, 0, 10_000))
        steps.append(call(at, alias, "open", name))
        uses.append(Use("sub_agent", "fibers of its own", alias, "workload:sub_agent_opened"))
        horizon = max(horizon, at + busy)
    closed = st.lists(st.sampled_from(names), max_size=3 if loose else 2, unique=not loose)
    for name in draw(closed):
        at = draw(aligned(st, periods, 0, span))
        steps.append(call(at, alias, "close", name))
        uses.append(Use("delete_sub_agent", "by a call", alias, "workload:sub_agent_closed"))
        if draw(st.booleans()):
            again = at + draw(aligned(st, periods, 0, span))
            steps.append(call(again, alias, "open", name))
            uses.append(
                Use("sub_agent", "re-created under its name", alias, "workload:sub_agent_opened")
            )
            horizon = max(horizon, again + busy)
    return horizon


MCP_SERVERS = ("search", "files")
"""The names of the MCP servers a fibers agent may connect."""
