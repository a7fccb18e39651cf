"""Cron expressions in every field form: `*`, a value, a range, a step over `*` or a range, a
comma list, month and weekday names, the six-field form with seconds, and the nicknames.

The SDK's cron package reads them (`cron-schedule`), and so does the runtime's port; the drawn
expression is only a string here. Each field draws among forms that keep the expression due
often enough for a run: the day, month and weekday fields always allow the first days of the
simulation's calendar (it starts on Thursday 1 January 1970), so the runs a schedule asks for
come within `HORIZON_MS`; `due_within` says whether they do. It asks the checkers' cron model
(`sim.checkers.models.cron`), never the runtime's parser: what is drawn must not depend on the
code under test, or a slip in that code would change, or break, the drawing itself.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sim.checkers.models.cron import InvalidCron, next_cron_due_ms

__all__ = ["CRON_FORMS", "HORIZON_MS", "crons", "due_within", "forms_of"]

HORIZON_MS = 4 * 86_400_000
"""The runs of a drawn cron schedule all come within this long of the start."""
NICKNAMES = ("@hourly", "@daily", "@minutely")
CRON_FORMS = ("any", "value", "range", "step", "range-step", "list", "name", "seconds", "nickname")
"""The forms a drawn expression may use; `forms_of` says which one does (API coverage)."""


def _clock_field(st: Any, high: int) -> Any:
    """A second, minute or hour field (0..high)."""
    value = st.integers(0, high)
    return st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda t: f"{min(t)}-{max(t)}"),
        st.integers(1, max(1, high // 2)).map(lambda n: f"*/{n}"),
        st.tuples(value, value, st.integers(1, 15)).map(
            lambda t: f"{min(t[0], t[1])}-{max(t[0], t[1])}/{t[2]}"
        ),
        st.lists(value, min_size=2, max_size=4, unique=True).map(
            lambda vs: ",".join(map(str, sorted(vs)))
        ),
    )


def _day_field(st: Any) -> Any:
    """Day of month: forms that hold the 1st or the 2nd."""
    return st.one_of(
        st.just("*"),
        st.sampled_from(("1", "2")),
        st.integers(2, 31).map(lambda b: f"1-{b}"),
        st.integers(1, 10).map(lambda n: f"*/{n}"),
        st.integers(3, 31).map(lambda b: f"1-{b}/2"),
        st.integers(3, 31).map(lambda b: f"1,{b}"),
    )


def _month_field(st: Any) -> Any:
    """Month: forms that hold January."""
    return st.one_of(
        st.just("*"),
        st.sampled_from(("1", "jan", "JAN")),
        st.integers(2, 12).map(lambda b: f"1-{b}"),
        st.integers(2, 6).map(lambda n: f"*/{n}"),
        st.sampled_from(("jan-mar", "jan,jul", "1-12/3")),
    )


def _weekday_field(st: Any) -> Any:
    """Day of week: forms that hold Thursday or Friday (1-2 January 1970)."""
    return st.one_of(
        st.just("*"),
        st.sampled_from(("4", "5", "thu", "fri", "THU")),
        st.sampled_from(("1-5", "mon-fri", "4-6", "thu-sun", "0-7", "4-7/2")),
        st.sampled_from(("*/1", "1,4", "thu,fri", "0,4,5")),
    )


@cache
def crons(st: Any) -> Any:
    """A cron expression: five fields, six with seconds, or a nickname."""
    five = st.tuples(
        _clock_field(st, 59),
        _clock_field(st, 23),
        _day_field(st),
        _month_field(st),
        _weekday_field(st),
    ).map(" ".join)
    six = st.tuples(_clock_field(st, 59), five).map(" ".join)
    every = st.one_of(st.just("* * * * *"), five, six, st.sampled_from(NICKNAMES))
    return every


def due_within(
    expression: str, runs: int, horizon_ms: int = HORIZON_MS, start_ms: int = 0
) -> int | None:
    """When the `runs`-th occurrence after `start_ms` comes, if within `horizon_ms` of the
    scenario's start; else None."""
    at = start_ms
    try:
        for _ in range(runs):
            at = next_cron_due_ms(expression, at)
            if at > horizon_ms:
                return None
    except InvalidCron:
        return None
    return at


def forms_of(expression: str) -> list[str]:
    """The field forms `expression` uses (`CRON_FORMS`), in that order."""
    if expression.startswith("@"):
        return ["nickname"]
    fields = expression.split()
    found: set[str] = {"seconds"} if len(fields) == 6 else set()
    for field in fields:
        for part in field.split(","):
            if "," in field:
                found.add("list")
            if part == "*":
                found.add("any")
            elif "/" in part:
                found.add("step" if part.startswith("*") else "range-step")
            elif "-" in part:
                found.add("range")
            elif part.isdigit():
                found.add("value")
            if any(ch.isalpha() for ch in part):
                found.add("name")
    return [form for form in CRON_FORMS if form in found]
