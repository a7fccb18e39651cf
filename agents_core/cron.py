"""Cron expressions as the SDK reads them: parsing, and the next occurrence after a given instant.

The SDK turns a cron schedule into its next run with the npm package ``cron-schedule``
(``parseCronExpression(cron).getNextDate()``); this is our own implementation of the syntax and
semantics that package accepts, so a ``schedule("*/5 * * * *", ...)`` row lands on the same instants
here as there. Times are integer milliseconds since the Unix epoch, in UTC (the Workers clock is
UTC); calendar arithmetic is plain integer maths, so no clock is ever read.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["CronExpression", "InvalidCronExpression", "next_cron_time_ms", "parse_cron"]


class InvalidCronExpression(ValueError):
    """A cron string that cannot be parsed or never matches; the message shows what was allowed."""


class _Field(NamedTuple):
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name_value: int = 0


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DAY_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = _Field("month", 1, 12, _MONTH_NAMES, 1)
# cron-schedule reads "sun" as 7, not 0; it only matters for ranges (see _parse_part).
_DAY_OF_WEEK = _Field("day-of-week", 0, 7, ("mon", "tue", "wed", "thu", "fri", "sat", "sun"), 1)
_FIELDS = (_SECOND, _MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK)

_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@hourly": "0 * * * *",
    "@minutely": "* * * * *",
}
_FORMS = "'*', a value, a range 'a-b', a step '*/n' or 'a-b/n', or a comma list of these"
_RANGE = re.compile(r"([0-9A-Za-z]+)-([0-9A-Za-z]+)")
_DIGITS = re.compile(r"[0-9]+")
_QUARTZ_ONLY = re.compile(r"\?|[0-9]*(L|W|LW)|L-[0-9]+|.*#.*", re.IGNORECASE)

_MONTH_DAYS_MAX = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_SECONDS_PER_DAY = 86_400
_EPOCH_WEEKDAY = 4  # 1970-01-01 was a Thursday; weekdays count from Sunday = 0 as in cron.
# Past 400 years the Gregorian calendar repeats, so a search that long has seen every case.
_SEARCH_YEARS_MAX = 400


def _invalid(expression: str, problem: str) -> InvalidCronExpression:
    return InvalidCronExpression(f"invalid cron expression {expression!r}: {problem}")


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression: each field's allowed values, sorted, and the text it came from.

    ``days_of_week`` counts from Sunday = 0 (a written 7 is folded into 0). A 5-field expression
    has ``seconds == (0,)``, so it fires on whole minutes.
    """

    source: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    days_of_week: tuple[int, ...]

    @property
    def day_of_month_restricted(self) -> bool:
        """True unless the field allows every day 1-31 (``*`` and ``1-31`` both count as open)."""
        return len(self.days_of_month) != 31

    @property
    def day_of_week_restricted(self) -> bool:
        """True unless the field allows every weekday (``*``, ``0-6`` and ``0-7`` count as open)."""
        return len(self.days_of_week) != 7

    def next_after_ms(self, after_ms: int) -> int:
        """The first occurrence strictly after ``after_ms``, in epoch milliseconds (UTC)."""
        if isinstance(after_ms, bool) or not isinstance(after_ms, int):
            raise TypeError(f"after_ms must be an int of epoch milliseconds, got {after_ms!r}")
        # Occurrences fall on whole seconds, so the first candidate is the next whole second.
        days, second_of_day = divmod(after_ms // 1000 + 1, _SECONDS_PER_DAY)
        year, month, day = _civil_from_days(days)
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        year_last = year + _SEARCH_YEARS_MAX
        while year <= year_last:
            if month not in self.months:
                index = bisect_left(self.months, month)
                if index == len(self.months):
                    year, month = year + 1, self.months[0]
                else:
                    month = self.months[index]
                day, hour, minute, second = 1, 0, 0, 0
            found_day = self._first_day_from(year, month, day)
            if found_day is None:
                year, month = (year + 1, 1) if month == 12 else (year, month + 1)
                day, hour, minute, second = 1, 0, 0, 0
                continue
            if found_day != day:
                day, hour, minute, second = found_day, 0, 0, 0
            time_of_day = self._first_time_from(hour, minute, second)
            if time_of_day is None:
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            hour, minute, second = time_of_day
            day_s = _days_from_civil(year, month, day) * _SECONDS_PER_DAY
            return (day_s + hour * 3600 + minute * 60 + second) * 1000
        raise _invalid(
            self.source,
            f"no occurrence in the {_SEARCH_YEARS_MAX} years after {after_ms} ms; no date matches",
        )

    def _day_matches(self, day: int, weekday: int) -> bool:
        by_day = day in self.days_of_month
        by_weekday = weekday in self.days_of_week
        # crontab(5), which cron-schedule follows: when both fields are restricted, either one
        # matching is enough; otherwise the open field matches every day and both must hold.
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return by_day or by_weekday
        return by_day and by_weekday

    def _first_day_from(self, year: int, month: int, day: int) -> int | None:
        last = _days_in_month(year, month)
        weekday = (_days_from_civil(year, month, day) + _EPOCH_WEEKDAY) % 7
        for candidate in range(day, last + 1):
            if self._day_matches(candidate, weekday):
                return candidate
            weekday = (weekday + 1) % 7
        return None

    def _first_time_from(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        for h in self.hours[bisect_left(self.hours, hour) :]:
            if h > hour:
                return h, self.minutes[0], self.seconds[0]
            for m in self.minutes[bisect_left(self.minutes, minute) :]:
                if m > minute:
                    return h, m, self.seconds[0]
                index = bisect_left(self.seconds, second)
                if index < len(self.seconds):
                    return h, m, self.seconds[index]
        return None


def parse_cron(expression: str) -> CronExpression:
    """Parse a cron expression with the syntax the SDK's ``cron-schedule`` accepts.

    Five space-separated fields ``minute hour day-of-month month day-of-week``, or six with a
    ``second`` field first. Each field takes ``*``, a number, a range ``a-b``, a step on ``*`` or on
    a range (``*/n``, ``a-b/n``) and comma lists of these; months and weekdays also take English
    three-letter names in any case, and weekday 7 is Sunday. The nicknames ``@yearly``,
    ``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@hourly`` and ``@minutely`` stand for
    the usual 5-field expressions. ``?``, ``L``, ``W``, ``#`` and a year field are not supported.
    """
    if not isinstance(expression, str):
        raise TypeError(f"a cron expression must be a str, got {type(expression).__name__}")
    text = _NICKNAMES.get(expression.lower(), expression)
    if text.startswith("@"):
        raise _invalid(expression, f"unknown nickname {text!r}; allowed: {', '.join(_NICKNAMES)}")
    # cron-schedule splits on single spaces and drops the empty pieces; tabs are not separators.
    parts = [part for part in text.split(" ") if part]
    if len(parts) not in (5, 6):
        raise _invalid(
            expression,
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a "
            f"seconds field first, got {len(parts)}",
        )
    if len(parts) == 5:
        parts.insert(0, "0")
    fields = zip(parts, _FIELDS, strict=True)
    cron = CronExpression(expression, *(_parse_field(p, f, expression) for p, f in fields))
    if cron.day_of_month_restricted and not cron.day_of_week_restricted:
        longest = max(_MONTH_DAYS_MAX[month] for month in cron.months)
        if cron.days_of_month[0] > longest:
            raise _invalid(
                expression,
                f"day-of-month field allows only {_listing(cron.days_of_month)}, but the month "
                f"field allows only {_listing(cron.months)} (at most {longest} days); "
                "no date ever matches",
            )
    return cron


def next_cron_time_ms(expression: str, after_ms: int) -> int:
    """The first occurrence of ``expression`` strictly after ``after_ms`` (epoch ms, UTC)."""
    return parse_cron(expression).next_after_ms(after_ms)


def _parse_field(text: str, field: _Field, expression: str) -> tuple[int, ...]:
    values: set[int] = set()
    for part in text.split(","):
        values.update(_parse_part(part, field, expression))
    if field is _DAY_OF_WEEK:
        values = {value % 7 for value in values}
    return tuple(sorted(values))


def _parse_part(part: str, field: _Field, expression: str) -> range:
    base, slash, step_text = part.partition("/")
    if base == "*":
        low, high = field.low, field.high
    elif match := _RANGE.fullmatch(base):
        low = _parse_value(match[1], field, expression)
        high = _parse_value(match[2], field, expression)
        if field is _DAY_OF_WEEK and low == 7 and high != 7:
            low = 0  # as cron-schedule: "sun-sat" and "7-3" start the week on Sunday
        if low > high:
            raise _invalid(
                expression,
                f"{field.name} field range {base!r} runs from {low} down to {high}; "
                "write the smaller value first",
            )
    elif slash:
        raise _invalid(
            expression,
            f"{field.name} field value {part!r} puts a step on a single value; a step needs '*' "
            f"or a range before it, e.g. '*/{step_text}' or '{base}-{field.high}/{step_text}'",
        )
    else:
        value = _parse_value(base, field, expression)
        return range(value, value + 1)
    if not slash:
        return range(low, high + 1)
    if not _DIGITS.fullmatch(step_text) or int(step_text) < 1:
        raise _invalid(
            expression,
            f"{field.name} field step {step_text!r} in {part!r} must be a whole number >= 1",
        )
    return range(low, high + 1, int(step_text))


def _parse_value(token: str, field: _Field, expression: str) -> int:
    if _DIGITS.fullmatch(token):
        value = int(token)
        if not field.low <= value <= field.high:
            raise _invalid(
                expression,
                f"{field.name} field value {value} is out of range {field.low}-{field.high}",
            )
        return value
    if token.lower() in field.names:
        return field.names.index(token.lower()) + field.first_name_value
    names = f" or a name {field.names[0]}-{field.names[-1]}" if field.names else ""
    unsupported = ""
    if _QUARTZ_ONLY.fullmatch(token):
        unsupported = " (cron-schedule has no '?', 'L', 'W' or '#')"
    raise _invalid(
        expression,
        f"{field.name} field value {token!r} is not a number {field.low}-{field.high}{names}"
        f"{unsupported}; a field takes {_FORMS}",
    )


def _listing(values: tuple[int, ...]) -> str:
    return ",".join(str(value) for value in values)


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if calendar.isleap(year) else 28
    return _MONTH_DAYS_MAX[month]


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's integer algorithm)."""
    year -= month <= 2
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * ((month + 9) % 12) + 2) // 5 + day - 1  # counted from March 1st
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) of a count of days since 1970-01-01; inverse of _days_from_civil."""
    era, day_of_era = divmod(days + 719_468, 146_097)
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_from_march = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_from_march + 2) // 5 + 1
    month = month_from_march + 3 if month_from_march < 10 else month_from_march - 9
    return era * 400 + year_of_era + (month <= 2), month, day
