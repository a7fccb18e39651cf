"""The `schedules` area: a `schedules` workload with drawn schedules of every kind.

Delayed (`after`), dated (`at`), cron (a drawn expression, `scenarios.generate.cron`) and
interval (`every`) schedules, a few at once; retries (`attempts`, the agent's `retry`
options with drawn backoff bounds), callbacks that fail their first attempts, work long
enough to meet the platform's 15-minute alarm limit, work inside `keep_alive_while` or a
fiber; set up at startup (after a drawn warmup) or by a `setup` call; cancelled by calls that
are drawn to land on a run's instant exactly, a millisecond either side, or anywhere.

For 0.32.0's job layer: now and then a burst (four to `BURST_MAX` schedules of one kind and one
delay, past the driver's backlog warning with a sub-agent's copies), rows due together (a
one-shot or an interval taking the first schedule's delay, so one wake drives several overdue
jobs in order, beside a failing or a long one), `recovery_loop` on a one-shot or a cron, and the
agent's `hung_schedule_timeout_seconds` drawn around its longest work.
"""

from __future__ import annotations

from typing import Any

from scenarios.generate.cron import crons, due_within, forms_of
from scenarios.generate.durations import aligned, seconds
from scenarios.generate.parts import Part, TimedStep, Use, call
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.emit import format_duration
from sim.units import parse_duration_ms

CRON_FAULT_SLACK = 2
"""Occurrences a cron is given beyond its runs and failing attempts: a drawn fault may cost it
one (a storage fault inside a run, a crash before its row moved on), and a sparse expression's
next occurrence can be a month away, past any run's limit."""

__all__ = ["schedules_part"]

KINDS = ("delayed", "scheduled", "cron", "interval")
ALARM_LIMIT_MS = 15 * 60_000


def _schedule(
    st: Any,
    draw: Any,
    name: str,
    alias: str,
    count: int,
    surface: Surface,
    load: int = 1,
    instant: int | None = None,
    kinds: tuple[str, ...] = KINDS,
) -> tuple[dict[str, Any], list[Use], int]:
    """One schedule entry, its uses and the time it needs; `load` agents (the root and its
    sub-agents) keep it, and one alarm runs all of their due rows one after another.
    `instant`: the delay (ms, whole seconds) of an earlier schedule of the agent, which a
    one-shot or an interval takes as its own, so their rows come due together; `kinds`: those
    its kind is drawn from."""
    kind = draw(st.sampled_from(kinds))
    entry: dict[str, Any] = {"name": name}
    uses = [Use("schedule", kind, alias, "schedule:create")]
    fail = draw(st.integers(0, 3))
    if kind == "interval":
        shared = instant is not None and 1000 <= instant <= 600_000
        every = instant if shared and instant is not None else draw(seconds(st, 1, 600))
        runs = draw(st.integers(1, 4))
        entry.update(every=format_duration(every), runs=runs)
        horizon, period = every * (runs + fail), every
    elif kind == "cron":
        runs = draw(st.integers(1, 3))
        # A run whose attempts all fail is not done: the schedule needs one occurrence more;
        # and a drawn fault may cost an occurrence too (`CRON_FAULT_SLACK`).
        needed = runs + fail + CRON_FAULT_SLACK
        expression = draw(crons(st).filter(lambda e: due_within(e, needed) is not None))
        entry.update(cron=expression, runs=runs)
        uses += [Use("cron", form, alias, "schedule:execute") for form in forms_of(expression)]
        horizon = due_within(expression, needed) or 0
        period = _cron_gap(expression, runs)
    else:
        at = instant if instant is not None else draw(seconds(st, 0, 3600))
        entry["after" if kind == "delayed" else "at"] = format_duration(at)
        horizon, period = at, max(at, 1000)
    if fail:
        entry["fail"] = fail
        uses.append(Use("schedule", "callback raises", alias, "workload:schedule_failed"))
        # A callback may fail as the platform does instead: a one-shot's with a memory-limit
        # reset (the alarm breaker backs its row off, up to 300 s a strike, or seals it), any
        # one's with a lost network connection (deferred to the platform's alarm retries).
        if surface.opens("schedules", "fail_as") and not draw(st.integers(0, 2)):
            one_shot = kind in ("delayed", "scheduled")
            entry["fail_as"] = draw(
                st.sampled_from(("memory", "network") if one_shot else ("network",))
            )
            if entry["fail_as"] == "memory":
                what, event, extra = "resets at the memory limit", "alarm:memory_limit_reset", 300
            else:
                what, event, extra = "loses the network", "workload:schedule_failed", 130
            uses.append(Use("schedule", f"callback {what}", alias, event))
            horizon += fail * extra * 1000
    attempts = draw(st.one_of(st.none(), st.integers(1, 4)))
    if attempts is not None:
        entry["attempts"] = attempts
        uses.append(Use("schedule", "retry.max_attempts", alias, "schedule:retry"))
    backoff = 0
    if surface.opens("schedules", "backoff_ms") and draw(st.integers(0, 2)) == 0:
        backoff = draw(st.sampled_from((1, 100, 1000, 5000)))
        entry["backoff"] = format_duration(backoff)
        entry["max_backoff"] = format_duration(backoff * draw(st.sampled_from((1, 3, 30))))
        uses.append(Use("schedule", "retry.backoff", alias, "schedule:retry"))
    # One alarm may run every due schedule of the agent, each with its retries in process: past
    # the 15-minute alarm limit the platform kills every attempt and the agent never settles.
    # So the work is kept under the limit over all of them (a one-shot alone, tried once, may
    # come a millisecond short of it), and under half a recurring schedule's period, counting
    # every agent that keeps the same schedules.
    tries = 1 if not fail else (attempts or 4)
    alone = count == 1 and load == 1 and tries == 1 and kind in ("delayed", "scheduled")
    ceiling = ALARM_LIMIT_MS - 1 if alone else (ALARM_LIMIT_MS // 2) // (count * tries * load)
    if kind in ("interval", "cron"):
        ceiling = min(ceiling, period // (2 * load))
    ceiling = max(0, ceiling - 150_000 * (tries - 1) * bool(backoff))
    work = draw(
        st.one_of(st.just(0), aligned(st, [period], 0, ceiling), st.just(ceiling if alone else 0))
    )
    if work:
        entry["work"] = format_duration(work)
        if work > ALARM_LIMIT_MS // 2:
            uses.append(Use("alarm", "a long handler", alias, "alarm:done"))
    if (
        kind != "interval"
        and surface.opens("schedules", "idempotent")
        and not draw(st.integers(0, 2))
    ):
        entry["idempotent"] = draw(st.booleans())
        uses.append(
            Use(
                "schedule",
                f"idempotent: {str(entry['idempotent']).lower()}",
                alias,
                "schedule:create",
            )
        )
    if (
        kind != "interval"
        and surface.opens("schedules", "recovery_loop")
        and draw(st.integers(0, 3)) == 3
    ):
        # A member of the memory-limit breaker's recovery loop (0.32.0): backed off with the
        # job that hit the limit, or purged with it when the breaker seals (0.21.0 ignores it).
        entry["recovery_loop"] = True
        uses.append(Use("schedule", "recovery_loop", alias, "schedule:create"))
    for flag, api in (("keep_alive", "keep_alive_while"), ("fiber", "run_fiber")):
        if draw(st.booleans()):
            entry[flag] = True
            event = "keep_alive:acquire" if flag == "keep_alive" else "fiber:run:started"
            uses.append(Use(api, "in a schedule callback", alias, event))
    return entry, uses, horizon + work * 4 + 60_000


def schedules_part(
    st: Any, alias: str, surface: Surface = FULL, facets: tuple[tuple[str, ...], ...] = ()
) -> Any:
    """A strategy of `Part`: one `schedules` agent named `alias`, using only the methods and
    plan fields `surface` keeps open. `facets`: the sub-agent lists the agent always draws one
    of (the `facets` area), whose closes may come at any time, before an open or twice;
    without, it draws sub-agents now and then."""

    @st.composite
    def part(draw: Any) -> Part:
        count = draw(st.integers(1, 3))
        # Now and then a burst: many schedules of one callback, as an agent scheduling one
        # reminder per item would, enough to pass the job driver's backlog warning (ten due
        # jobs of one owner in one alarm; 0.21.0's duplicate warning, ten stale one-shots).
        # (An interior value: Hypothesis draws a range's ends more often than one in eight,
        # and a burst of twelve schedules slows a run several times over.)
        burst = draw(st.integers(0, 11)) == 5
        if burst:
            count = draw(st.integers(4, BURST_MAX))
            uses_burst = [Use("schedule", "a burst of one callback", alias, "job:backlog_warning")]
        else:
            uses_burst = []
        # And now and then their rows come due together (a one-shot or an interval takes the
        # first schedule's delay): one wake then has several overdue jobs to drive in order.
        together = burst or draw(st.integers(0, 2)) == 2
        subs: tuple[str, ...] = ()
        if facets:
            subs = draw(st.sampled_from(facets))
        elif surface.opens("schedules", "open") and not draw(st.integers(0, 2)):
            subs = draw(st.sampled_from(SUB_AGENT_NAMES))
        entries, uses, horizon = [], list(uses_burst), 0
        instant: int | None = None
        # A burst's schedules are of one kind, a one-shot or an interval, with one delay.
        kinds: tuple[str, ...] = ("delayed", "scheduled", "interval") if burst else KINDS
        for index in range(count):
            entry, used, busy = _schedule(
                st, draw, f"s{index + 1}", alias, count, surface, 1 + len(subs), instant, kinds
            )
            if together and instant is None:
                instant = _instant_ms(entry)
            if burst:
                kinds = (str(used[0].option),)
            entries.append(entry)
            uses += used
            horizon = max(horizon, busy)
        agent: dict[str, Any] = {"workload": "schedules"}
        setup = draw(st.sampled_from(("on_start", "call")))
        if setup == "call":
            agent["setup"] = "call"
        # An alarm that wakes the agent runs its startup first, warmup included: a cron whose
        # occurrences come closer than that (and its work) would see the next ones pass during
        # it, and they collapse into one (its runs would then take a week of Thursdays).
        room = min(
            (
                _cron_gap(entry["cron"], int(entry.get("runs", 1)) + int(entry.get("fail", 0))) // 2
                - (parse_duration_ms(entry["work"]) if "work" in entry else 0)
                for entry in entries
                if "cron" in entry
            ),
            default=5_000,
        )
        # Drawn as ever, then held to the room (so that what else is drawn stays as it was).
        warmup = min(draw(st.one_of(st.just(0), seconds(st, 1, 5))), max(0, room // 1000) * 1000)
        if warmup:
            agent["warmup"] = format_duration(warmup)
            uses.append(Use("on_start", "awaits (warmup)", alias, "workload:warmed_up"))
            # An alarm that wakes the agent runs its startup, warmup included, inside the
            # handler's 15 minutes: a callback's work is kept under what is left of them.
            for entry in entries:
                if (
                    "work" in entry
                    and parse_duration_ms(entry["work"]) > ALARM_LIMIT_MS - 1 - warmup
                ):
                    entry["work"] = format_duration(ALARM_LIMIT_MS - 1 - warmup)
        _hung_timeout(st, draw, alias, agent, entries, uses)
        retry = draw(st.one_of(st.none(), _retry(st)))
        if retry is not None:
            agent.setdefault("options", {})["retry"] = retry
            uses += [Use("retry", key, alias, "schedule:retry") for key in sorted(retry)]
        if any(entry.get("fail_as") == "memory" for entry in entries):
            strikes = draw(st.integers(1, 4))
            agent.setdefault("options", {})["max_alarm_memory_limit_strikes"] = strikes
            uses.append(
                Use("option", "max_alarm_memory_limit_strikes", alias, "alarm:memory_limit_reset")
            )
        agent["schedules"] = entries
        steps = [call(0, alias, "status")]
        if setup == "call":
            steps.append(call(draw(seconds(st, 0, 10)), alias, "setup"))
            uses.append(Use("setup", "by a call", alias, "workload:scheduled"))
        periods = [_period_ms(entry) for entry in entries]
        for entry in draw(st.lists(st.sampled_from(entries), max_size=2)):
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            steps.append(call(at, alias, "cancel", entry["name"]))
            uses.append(Use("cancel_schedule", "by a call", alias, "schedule:cancel"))
        if subs:
            horizon = _sub_agents(
                st, draw, alias, agent, subs, entries, periods, steps, uses, horizon, bool(facets)
            )
        recreated = entries if surface.opens("schedules", "recreate") else []
        for entry in draw(st.lists(st.sampled_from(recreated), max_size=2)) if recreated else []:
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            done = _done_by(entry, at)
            if done is None:
                continue
            # The new row runs its course from the call on, and the run is given the time.
            horizon = max(horizon, done)
            steps.append(call(at, alias, "recreate", entry["name"]))
            uses.append(Use("schedule", "re-created", alias, "workload:scheduled"))
        again = surface.opens("schedules", "every_again")
        intervals = [entry for entry in entries if "every" in entry and again]
        for entry in draw(st.lists(st.sampled_from(intervals), max_size=1)) if intervals else []:
            # A user changing an interval's period: another interval is a row of its own, the
            # same one answers the row there (a dedupe key scoped by the interval).
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            same = max(parse_duration_ms(entry["every"]) // 1000, 1)
            period = draw(st.sampled_from((1, 5, 30, 60, same)))
            steps.append(call(at, alias, "every_again", entry["name"], period))
            uses.append(Use("schedule_every", "another interval", alias, "workload:scheduled"))
        for _ in range(draw(st.integers(0, 2)) if surface.opens("schedules", "listing") else 0):
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            kind = draw(st.sampled_from((None, *KINDS)))
            # Range ends on a row's due instant, a millisecond beside it, or open.
            start, end = (
                draw(st.one_of(st.none(), aligned(st, periods, 0, max(horizon, 1000))))
                for _ in range(2)
            )
            steps.append(call(at, alias, "listing", kind, start, end))
            uses.append(
                Use("list_schedules", "type" if kind else "any type", alias, "workload:listed")
            )
            if start is not None or end is not None:
                uses.append(Use("list_schedules", "time_range", alias, "workload:listed"))
        if draw(st.booleans()):
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            # A request is a startup trigger: when a fault cut the agent's first startup short
            # (a deploy in its warmup), this one may be the startup that sets the schedules up,
            # and the run is given the time they need from it (or it is not sent).
            done = _all_done_by(entries, at) if setup == "on_start" else horizon
            if done is not None:
                horizon = max(horizon, done)
                steps.append(
                    TimedStep(at, "request", {"agent": alias, "method": "GET", "path": "/"})
                )
                uses.append(Use("on_request", "GET", alias, "request"))
        if surface.opens("schedules", "destroy_agent") and draw(st.integers(0, 5)) == 0:
            # The agent destroys itself (its rows, its alarm, its sub-agents), at once or by
            # its next alarm; a later call starts it afresh, and its startup may set up again.
            at = draw(aligned(st, periods, 0, max(horizon, 1000)))
            # A call after it starts the agent afresh, whose startup may set its schedules up
            # again: the run is given the time they need from the last such call.
            later = [step.at_ms for step in steps if step.at_ms >= at]
            done = _all_done_by(entries, max(later, default=at))
            if done is None:
                return Part({alias: agent}, tuple(steps), uses=tuple(uses), horizon_ms=horizon)
            horizon = max(horizon, done)
            deferred = draw(st.booleans())
            step = call(at, alias, "destroy_agent", None, deferred)
            if not deferred:  # the call dies with the incarnation it destroys
                step = TimedStep(at, "call", {**step.args, "may_fail_with": "AgentEvicted"})
            steps.append(step)
            how = "deferred" if deferred else "at once"
            uses.append(Use("destroy", f"the agent itself, {how}", alias, "workload:destroying"))
        return Part({alias: agent}, tuple(steps), uses=tuple(uses), horizon_ms=horizon)

    return part()


BURST_MAX = 12
"""Schedules of one agent in a burst: with a sub-agent or two keeping the same ones, past the
job driver's backlog warning (`JOB_BACKLOG_WARNING_THRESHOLD`, ten) even when some are crons."""


def _instant_ms(entry: dict[str, Any]) -> int | None:
    """The delay of a one-shot or an interval (what a later schedule may share); None for a
    cron."""
    for key in ("after", "at", "every"):
        if key in entry:
            return parse_duration_ms(entry[key])
    return None


def _hung_timeout(
    st: Any,
    draw: Any,
    alias: str,
    agent: dict[str, Any],
    entries: list[dict[str, Any]],
    uses: list[Use],
) -> None:
    """Now and then the agent's `hung_schedule_timeout_seconds`, drawn around its longest
    work (a second under it, at it, over it) or a second: a dispatch that outlives it is warned
    about (0.32.0's slow-dispatch watchdog), and an interval left running by a dead isolate is
    forced again once it has passed."""
    if draw(st.integers(0, 3)) != 3:
        return
    longest = max((parse_duration_ms(entry.get("work", "0ms")) for entry in entries), default=0)
    around = longest // 1000
    seconds_ = draw(st.sampled_from(sorted({1, max(1, around - 1), max(1, around), around + 1})))
    agent.setdefault("options", {})["hung_schedule_timeout_seconds"] = seconds_
    uses.append(Use("option", "hung_schedule_timeout_seconds", alias, "schedule:execute"))
    if 0 < seconds_ * 1000 <= longest:
        uses.append(Use("job", "a dispatch past its hung timeout", alias, "job:slow_dispatch"))


SUB_AGENT_NAMES = (
    ("w1",),
    ("w1", "w10"),
    ("w1", "w2"),
    ("a", "a-b"),
    ("w1", "w1/x"),
    ("w1", "w1/w1", "w10"),
    ("w1", "twin:w1"),
)
"""The sub-agents a schedules agent may open: one, two whose names differ by a suffix or a
digit, as a user's would, a sub-agent of a sub-agent (`w1/x`, opened by `w1`), or two of one
name and two classes (`twin:w1`)."""


def _sub_agents(
    st: Any,
    draw: Any,
    alias: str,
    agent: dict[str, Any],
    names: tuple[str, ...],
    entries: list[dict[str, Any]],
    periods: list[int],
    steps: list[Any],
    uses: list[Use],
    horizon: int,
    loose: bool = False,
) -> int:
    """Sub-agents keeping the same schedules (their rows on this root, under their owner
    paths): each opened in the first ten seconds, some closed (deleted with their rows) and
    opened again under the same name; the horizon the run needs then. `loose`: a close may
    come at any time (before the open, or a second time) and up to three are drawn."""
    agent["sub_agents"] = list(names)
    span = horizon
    for name in names:
        at = draw(aligned(st, periods, 0, 10_000))
        # Its schedules count their runs from its opening: a cron whose occurrences come too
        # late from then is not opened there (the run could not settle).
        done = _all_done_by(entries, at)
        if done is None:
            continue
        steps.append(call(at, alias, "open", name))
        uses.append(Use("sub_agent", "schedules of its own", alias, "workload:sub_agent_opened"))
        horizon = max(horizon, done)
    closed = st.lists(st.sampled_from(names), max_size=3 if loose else 2, unique=not loose)
    for name in draw(closed):
        at = draw(aligned(st, periods, 0 if loose else 10_001, max(span, 10_002)))
        if draw(st.integers(0, 2)) == 0:
            # The sub-agent destroys itself: its parent deletes it, as a close would.
            steps.append(call(at, alias, "destroy_agent", name))
            uses.append(Use("destroy", "a sub-agent itself", alias, "workload:destroying"))
        else:
            steps.append(call(at, alias, "close", name))
            uses.append(Use("delete_sub_agent", "by a call", alias, "workload:sub_agent_closed"))
        if not draw(st.booleans()):
            continue
        again = at + draw(aligned(st, periods, 0, max(span, 1000)))
        done = _all_done_by(entries, again)
        if done is None:
            continue
        steps.append(call(again, alias, "open", name))
        uses.append(
            Use("sub_agent", "re-created under its name", alias, "workload:sub_agent_opened")
        )
        horizon = max(horizon, done)
    return horizon


def _all_done_by(entries: list[dict[str, Any]], at_ms: int) -> int | None:
    """When every schedule like `entries`, created at `at_ms`, has done its runs; None when a
    cron's occurrences come too late (`_done_by`)."""
    done = [_done_by(entry, at_ms) for entry in entries]
    return None if any(when is None for when in done) else max(w for w in done if w is not None)


def _done_by(entry: dict[str, Any], at_ms: int) -> int | None:
    """When a schedule like `entry`, created again at `at_ms` (its runs counted afresh), has
    done its runs and their work; None for a cron whose occurrences come too late."""
    tries = int(entry.get("runs", 1)) + int(entry.get("fail", 0))
    work = parse_duration_ms(entry["work"]) if "work" in entry else 0
    if "cron" in entry:
        due = due_within(entry["cron"], tries + CRON_FAULT_SLACK, start_ms=at_ms)
        if due is None:
            return None
    elif "every" in entry:
        due = at_ms + parse_duration_ms(entry["every"]) * tries
    elif "after" in entry:
        due = at_ms + parse_duration_ms(entry["after"])
    else:
        due = max(at_ms, parse_duration_ms(entry["at"]))
    return due + work * 4 + 60_000


def _retry(st: Any) -> Any:
    """The agent's default retry options: attempts and full-jitter backoff bounds (ms)."""
    base = st.sampled_from((1, 100, 1000, 5000))
    return st.tuples(st.integers(1, 4), base, st.sampled_from((1, 2, 10))).map(
        lambda t: {"max_attempts": t[0], "base_delay_ms": t[1], "max_delay_ms": t[1] * t[2]}
    )


def _period_ms(entry: dict[str, Any]) -> int:
    for key in ("every", "after", "at"):
        if key in entry:
            return max(parse_duration_ms(entry[key]), 1)
    return 60_000


def _cron_gap(expression: str, runs: int) -> int:
    """The shortest time between the first `runs` + 1 occurrences of `expression`."""
    times = [due_within(expression, n) or 0 for n in range(1, runs + 2)]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    return min(gaps, default=60_000)
