"""When a cron or interval schedule is next due, modelled from the spec and the SDK's cron
package's documented syntax, sharing no code with the runtime's scheduler.

The SDK computes a cron row's time with the `cron-schedule` package (sdk-0.32 §3.2: "String →
`cron`, the next occurrence (parser `cron-schedule`)"; fibers §4.4: "cron → `time = next occurrence
after now`"). That package reads Linux crontab syntax (crontab(5)) with an optional leading seconds
field: lists, ranges, ranges in lists, steps (`*/s`, `a-b/s`), month and weekday names
(case-insensitive), weekday 7 as Sunday and the nicknames `@yearly`, `@annually`, `@monthly`,
`@weekly`, `@daily`, `@hourly`, `@minutely`. In day of week, `sun` is 7 and a range that starts at 7
starts at 0 (`sat-sun` is Saturday and Sunday, `sun-sat` and `7-1` run from Sunday), as that parser
reads them (checked against it: `tests/checkers/test_cron_model.py`). Times are UTC (the Workers
runtime's clock). Day of month and day of week combine as that package does: a field whose values
cover its whole range does not restrict the day; when both restrict, a day matching either one is
due (the crontab OR rule). The port's documented divergences apply (docs/divergences.md C1-C3): a
number with trailing text (`5/15`, `5abc`) is rejected rather than read as its leading digits, an
expression no date can ever match (`0 0 30 2 *`) is rejected when parsed, and the search spans 400
years.

Interval rows (fibers §4.2, §4.4; sdk-0.32 §3.3): the first run is due one interval after the
creation, in whole seconds; the next is due one interval after a run completes (0.21 floors the
completion to seconds, 0.32 keeps milliseconds).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "CronModel",
    "InvalidCron",
    "first_interval_due_ms",
    "next_cron_due_ms",
    "next_interval_due_ms",
    "parse_cron",
]

SEARCH_YEARS = 400
"""How far ahead an occurrence is looked for (divergence C3)."""

_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {
    "month": {name: n + 1 for n, name in enumerate(_MONTHS)},
    # `sun` is 7: `sat-sun` is Saturday and Sunday, and a range starting at 7 reads as from 0
    # (`sun-sat`, `7-1`), as the SDK's parser reads them.
    "day of week": {name: n or 7 for n, name in enumerate(_DAYS)},
}
_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@hourly": "0 * * * *",
    "@minutely": "* * * * *",
}


class InvalidCron(ValueError):
    """The expression is not one the SDK's parser accepts (or the port rejects: C1, C2)."""


@dataclass(frozen=True)
class CronModel:
    """A parsed expression: the allowed values of each field (weekday 7 folded into 0)."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]

    @property
    def days_restrict(self) -> bool:
        return self.days != frozenset(range(1, 32))

    @property
    def weekdays_restrict(self) -> bool:
        return self.weekdays != frozenset(range(7))

    def day_matches(self, year: int, month: int, day: int) -> bool:
        """The OR rule: with both day fields restricting, either one; else the one that does."""
        by_day = day in self.days
        by_weekday = (calendar.weekday(year, month, day) + 1) % 7 in self.weekdays
        if self.days_restrict and self.weekdays_restrict:
            return by_day or by_weekday
        if self.days_restrict:
            return by_day
        if self.weekdays_restrict:
            return by_weekday
        return True

    def next_after_ms(self, after_ms: int) -> int:
        """The first due instant strictly after `after_ms` (whole seconds, UTC, in ms)."""
        start = datetime.fromtimestamp(after_ms // 1000 + 1, UTC)
        horizon = start.year + SEARCH_YEARS
        day = start.replace(hour=0, minute=0, second=0)
        first = True
        while day.year <= horizon:
            if day.month not in self.months:
                day = _first_of_next_month(day)
                first = False
                continue
            if self.day_matches(day.year, day.month, day.day):
                found = self._time_in_day(day, start if first else None)
                if found is not None:
                    return int(found.timestamp()) * 1000
            day += timedelta(days=1)
            first = False
        raise InvalidCron(f"no occurrence within {SEARCH_YEARS} years")

    def _time_in_day(self, day: datetime, not_before: datetime | None) -> datetime | None:
        floor = (not_before.hour, not_before.minute, not_before.second) if not_before else (0, 0, 0)
        for hour in sorted(self.hours):
            if hour < floor[0]:
                continue
            for minute in sorted(self.minutes):
                if (hour, minute) < floor[:2]:
                    continue
                for second in sorted(self.seconds):
                    if (hour, minute, second) >= floor:
                        return day.replace(hour=hour, minute=minute, second=second)
        return None


def _first_of_next_month(day: datetime) -> datetime:
    if day.month == 12:
        return day.replace(year=day.year + 1, month=1, day=1)
    return day.replace(month=day.month + 1, day=1)


def _number(text: str, name: str, low: int, high: int, expression: str) -> int:
    names = _NAMES.get(name, {})
    if text.lower() in names:
        value = names[text.lower()]
    elif text.isdigit():
        value = int(text)
    else:
        raise InvalidCron(f"cron {expression!r}: {name} value {text!r} is not a number")
    if not low <= value <= high:
        raise InvalidCron(f"cron {expression!r}: {name} value {value} is outside {low}-{high}")
    return value


def _field(text: str, name: str, low: int, high: int, expression: str) -> frozenset[int]:
    values: set[int] = set()
    for element in text.split(","):
        span, slash, step_text = element.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise InvalidCron(f"cron {expression!r}: {name} step {step_text!r} is not > 0")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first = _number(a, name, low, high, expression)
            last = _number(b, name, low, high, expression)
            if name == "day of week" and first == 7 and last < 7:
                first = 0
            if first > last:
                raise InvalidCron(f"cron {expression!r}: {name} range {span!r} runs backwards")
        else:
            first = last = _number(span, name, low, high, expression)
            if slash:
                # crontab(5) has no `a/s`; the SDK's parser reads the leading digits (C1).
                raise InvalidCron(
                    f"cron {expression!r}: {name} {element!r} is a step without a range; "
                    f"write */{step} or {first}-{high}/{step}"
                )
        values.update(range(first, last + 1, step))
    if name == "day of week" and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


def parse_cron(expression: str) -> CronModel:
    """The expression's field sets; `InvalidCron` when the SDK's parser (or the port) rejects it."""
    text = expression.strip()
    text = _NICKNAMES.get(text.lower(), text)
    parts = text.split()
    if len(parts) == 5:
        parts = ["0", *parts]
    if len(parts) != 6:
        raise InvalidCron(f"cron {expression!r}: expected 5 or 6 fields, got {len(parts)}")
    sets = [
        _field(p, name, lo, hi, expression)
        for p, (name, lo, hi) in zip(parts, _FIELDS, strict=True)
    ]
    model = CronModel(*sets)
    if not model.weekdays_restrict or not model.days_restrict:
        possible = any(
            day <= calendar.monthrange(2000, month)[1]
            for month in model.months
            for day in model.days
        )
        if not possible:
            raise InvalidCron(f"cron {expression!r}: no date matches its day and month (C2)")
    return model


def next_cron_due_ms(expression: str, after_ms: int) -> int:
    """The first instant strictly after `after_ms` that `expression` names (ms, whole seconds)."""
    return parse_cron(expression).next_after_ms(after_ms)


def first_interval_due_ms(created_ms: int, interval_s: int) -> int:
    """A new interval row's time: `floor((now + interval·1000) / 1000)` seconds (fibers §4.2)."""
    return (created_ms + interval_s * 1000) // 1000 * 1000


def next_interval_due_ms(completed_ms: int, interval_s: int, release: str = "0.32") -> int:
    """When an interval row is due after a run completed at `completed_ms`: 0.21 floors the
    completion to seconds (fibers §4.4), 0.32 keeps milliseconds (sdk-0.32 §3.3 step 5)."""
    if release == "0.21":
        return (completed_ms // 1000 + interval_s) * 1000
    return completed_ms + interval_s * 1000
