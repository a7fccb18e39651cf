"""The checkers' cron model (`sim.checkers.models.cron`) against three others: the SDK's own
parser's answers (pinned), `croniter` (a second opinion, on drawn expressions and instants) and,
separately, the runtime's `next_cron_time_ms`, so that a disagreement is a failing test rather
than code the checker and the runtime share.

croniter and the SDK's parser (`cron-schedule`) differ on one point, and the property test accounts
for it: `cron-schedule` lets a day field restrict the day only when its values do not cover the
whole range (`1-31` or `*/1` in day of month, `0-6`, `1-7` or `*/1` in day of week behave as `*`),
while croniter treats any day field written other than `*` as restricting, so with the OR rule `0 0
1-31 * 5` is every day for croniter and every Friday for the SDK. The test writes a day field that
covers its range as `*` before it asks croniter. croniter 7.0 also reads a one-value range (`5-5`,
`mon-mon`) as `*`, where crontab(5) and the SDK read the one value: the test writes such a range as
its value. In day of week the SDK's parser reads `sun` as 7 (`sat-sun` is Saturday and Sunday)
where croniter reads it as 0 (so `sat-sun` runs backwards): the test gives croniter a day-of-week
field with names as the list of its days. Seconds: croniter wants `second_at_beginning=True` for
the SDK's six-field form.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from croniter import croniter
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agents_core.cron import InvalidCronExpression, next_cron_time_ms
from sim.checkers.models.cron import (
    InvalidCron,
    first_interval_due_ms,
    next_cron_due_ms,
    next_interval_due_ms,
    parse_cron,
)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def iso(value: int) -> str:
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")


# What `cron-schedule` 6.0.0 (the SDK's parser) answered, `getNextDates(3, start)` in UTC.
SDK_ANSWERS = [
    ("0 0 13 * 5", "2026-01-01T00:00:30", ["2026-01-02", "2026-01-09", "2026-01-13"]),
    ("0 0 */10 * 5", "2026-01-01T00:00:30", ["2026-01-02", "2026-01-09", "2026-01-11"]),
    ("0 0 1-31 * 5", "2026-01-01T00:00:30", ["2026-01-02", "2026-01-09", "2026-01-16"]),
    ("0 0 13 * 0-6", "2026-01-01T00:00:30", ["2026-01-13", "2026-02-13", "2026-03-13"]),
    ("0 0 13 * */1", "2026-01-01T00:00:30", ["2026-01-13", "2026-02-13", "2026-03-13"]),
    ("0 0 13 * 7", "2026-01-01T00:00:30", ["2026-01-04", "2026-01-11", "2026-01-13"]),
    ("0 0 1 * 1-7", "2026-01-02T00:00:00", ["2026-02-01", "2026-03-01", "2026-04-01"]),
    ("0 0 * * */2", "2026-01-02T00:00:00", ["2026-01-03", "2026-01-04", "2026-01-06"]),
    ("0 0 * * 5-7", "2026-01-02T00:00:00", ["2026-01-03", "2026-01-04", "2026-01-09"]),
    ("0 0 * * 7-1", "2000-01-01T00:00:00", ["2000-01-02", "2000-01-03", "2000-01-09"]),
    ("0 0 * * sat-sun", "2000-01-01T00:00:00", ["2000-01-02", "2000-01-08", "2000-01-09"]),
    ("0 0 * * sun-7", "2000-01-01T00:00:00", ["2000-01-02", "2000-01-09", "2000-01-16"]),
    ("0 0 * * sun-sat", "2000-01-01T00:00:00", ["2000-01-02", "2000-01-03", "2000-01-04"]),
    (
        "* * * * 0-sun",
        "2000-01-01T10:30:00",
        ["2000-01-01T10:31", "2000-01-01T10:32", "2000-01-01T10:33"],
    ),
    ("0 0 * * */3", "2000-01-01T00:00:00", ["2000-01-02", "2000-01-05", "2000-01-08"]),
    ("0 0 * * 4-7/2", "2000-01-01T00:00:00", ["2000-01-06", "2000-01-08", "2000-01-13"]),
    ("0 0 * jan-mar mon", "2026-01-01T00:00:30", ["2026-01-05", "2026-01-12", "2026-01-19"]),
    ("0 12 * * sun", "2026-01-01T00:00:30", ["2026-01-04T12", "2026-01-11T12", "2026-01-18T12"]),
    ("0 0 1 */2 *", "2026-01-02T00:00:00", ["2026-03-01", "2026-05-01", "2026-07-01"]),
    ("0 0 30 2,4 *", "2026-01-02T00:00:00", ["2026-04-30", "2027-04-30", "2028-04-30"]),
    ("0 0 29 2 *", "2026-01-01T00:00:30", ["2028-02-29", "2032-02-29", "2036-02-29"]),
    ("@daily", "2026-01-01T00:00:30", ["2026-01-02", "2026-01-03", "2026-01-04"]),
    (
        "@minutely",
        "2026-01-01T00:00:30",
        ["2026-01-01T00:01", "2026-01-01T00:02", "2026-01-01T00:03"],
    ),
    (
        "1-10/3 * * * *",
        "2026-01-01T00:00:00",
        ["2026-01-01T00:01", "2026-01-01T00:04", "2026-01-01T00:07"],
    ),
    (
        "1,5-7 * * * *",
        "2026-01-01T00:05:00",
        ["2026-01-01T00:06", "2026-01-01T00:07", "2026-01-01T01:01"],
    ),
    (
        "* * * * *",
        "2026-01-01T00:01:00",
        ["2026-01-01T00:02", "2026-01-01T00:03", "2026-01-01T00:04"],
    ),
    (
        "* * * * *",
        "2026-01-01T00:00:59.500",
        ["2026-01-01T00:01", "2026-01-01T00:02", "2026-01-01T00:03"],
    ),
    (
        "*/20 * * * * *",
        "2026-01-01T00:00:30",
        ["2026-01-01T00:00:40", "2026-01-01T00:01", "2026-01-01T00:01:20"],
    ),
    (
        "*/7 */5 * * *",
        "2026-01-02T23:58:00",
        ["2026-01-03T00:00", "2026-01-03T00:07", "2026-01-03T00:14"],
    ),
]
SDK_REJECTS = [
    "0 0 * * 5-0",
    "0 0 * * 6-1",
    "0 0 ? * 5",
    "15 10 L * *",
    "50-10 * * * *",
    "60 * * * *",
    "*/0 * * * *",
    "* * * *",
    "* * * * * * *",
    "0 0 * * 8",
    "0 0 0 * *",
    "0 24 * * *",
]
PORT_REJECTS = ["5/15 * * * *", "5abc * * * *", "1-5x * * * *", "0 0 31 4 *", "0 0 30 2 *"]
"""What the SDK's parser accepts and the port rejects (docs/divergences.md C1, C2)."""


def full(text: str) -> str:
    """`2026-01-04T12` as `2026-01-04T12:00:00`."""
    text = text if "T" in text else text + "T00"
    return text + "0000-00-00T00:00:00"[len(text) :]


@pytest.mark.parametrize(("expression", "start", "expected"), SDK_ANSWERS)
def test_the_model_answers_as_the_sdks_parser(expression: str, start: str, expected: list) -> None:
    at, got = ms(start), []
    for _ in expected:
        at = next_cron_due_ms(expression, at)
        got.append(iso(at))
    assert got == [full(e) for e in expected]


@pytest.mark.parametrize("expression", SDK_REJECTS + PORT_REJECTS)
def test_the_model_rejects_what_the_parser_or_the_port_rejects(expression: str) -> None:
    with pytest.raises(InvalidCron):
        parse_cron(expression)
    with pytest.raises(InvalidCronExpression):
        next_cron_time_ms(expression, 0)


def test_the_search_spans_four_hundred_years() -> None:
    """C3: `0 0 29 2 *` from 2096 is due in 2104 (2100 is no leap year)."""
    assert iso(next_cron_due_ms("0 0 29 2 *", ms("2096-03-01T00:00:00"))) == "2104-02-29T00:00:00"


def test_interval_due_times() -> None:
    assert first_interval_due_ms(1_500, 10) == 11_000
    assert next_interval_due_ms(61_700, 30, release="0.21") == 91_000
    assert next_interval_due_ms(61_700, 30) == 91_700


# -- drawn expressions ----------------------------------------------------------------------------
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@st.composite
def cron_field(draw: st.DrawFn, low: int, high: int, names: list[str] | None = None) -> str:
    def value(at_least: int = low) -> tuple[int, str]:
        n = draw(st.integers(at_least, high))
        if names and draw(st.booleans()) and n - (1 if names is MONTHS else 0) < len(names):
            word = names[n - 1 if names is MONTHS else n]
            return n, draw(st.sampled_from([word, word.upper(), word.title()]))
        return n, str(n)

    def element() -> str:
        form = draw(st.sampled_from(["*", "*/s", "a", "a-b", "a-b/s"]))
        step = str(draw(st.integers(1, high - low + 1)))
        if form == "*":
            return "*"
        if form == "*/s":
            return f"*/{step}"
        a, a_text = value()
        if form == "a":
            return a_text
        _, b_text = value(a)
        return f"{a_text}-{b_text}" + (f"/{step}" if form == "a-b/s" else "")

    return ",".join(element() for _ in range(draw(st.integers(1, 3))))


@st.composite
def cron_expression(draw: st.DrawFn) -> str:
    fields = [
        draw(cron_field(0, 59)),
        draw(cron_field(0, 23)),
        draw(cron_field(1, 31)),
        draw(cron_field(1, 12, MONTHS)),
        draw(cron_field(0, 7, DAYS)),
    ]
    if draw(st.integers(0, 5)) == 0:
        fields.insert(0, draw(cron_field(0, 59)))
    return " ".join(fields)


INSTANTS = st.integers(ms("2000-01-01T00:00:00"), ms("2099-12-31T23:59:59"))


def _bound(text: str) -> int:
    """A range bound's value as the SDK's cron package reads it: `sun` is 7 in a range, so
    `0-sun` is the whole week, not one day."""
    names = {n: i + 1 for i, n in enumerate(MONTHS)} | {n: i for i, n in enumerate(DAYS)}
    names[DAYS[0]] = 7
    return names.get(text.lower(), int(text) if text.isdigit() else -1)


def _no_one_value_range(field: str) -> str:
    out = []
    for element in field.split(","):
        span = element.partition("/")[0]
        a, dash, b = span.partition("-")
        out.append(a if dash and _bound(a) == _bound(b) else element)
    return ",".join(out)


def croniter_next(expression: str, after_ms: int) -> int:
    """croniter's next occurrence of the expression as croniter must be told it (see above)."""
    model = parse_cron(expression)
    fields = [_no_one_value_range(f) for f in expression.split()]
    seconds = len(fields) == 6
    day, weekday = (3, 5) if seconds else (2, 4)
    if not model.days_restrict:
        fields[day] = "*"
    if not model.weekdays_restrict:
        fields[weekday] = "*"
    elif any(c.isalpha() for c in fields[weekday]):
        fields[weekday] = ",".join(str(d) for d in sorted(model.weekdays))
    start = datetime.fromtimestamp(after_ms / 1000, UTC)
    found = croniter(" ".join(fields), start, second_at_beginning=seconds).get_next(datetime)
    return int(found.timestamp()) * 1000


def drawn_cases(expression: str, after_ms: int) -> list[int]:
    """The drawn instant, and the instants at and just before its next occurrence (a boundary
    hit exactly as well as missed)."""
    due = next_cron_due_ms(expression, after_ms)
    return [after_ms, due, due - 1]


SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)


@SETTINGS
@given(expression=cron_expression(), after_ms=INSTANTS)
@example(expression="0 0 1-31 * 5", after_ms=ms("2026-01-01T00:00:30"))
@example(expression="0 0 13 * 0-6", after_ms=ms("2026-01-01T00:00:30"))
@example(expression="* * * * 0-sun/2", after_ms=ms("2000-01-01T00:00:00"))
def test_the_model_agrees_with_croniter(expression: str, after_ms: int) -> None:
    try:
        parse_cron(expression)
    except InvalidCron:
        return  # an impossible date (C2): croniter searches on and gives up
    for at in drawn_cases(expression, after_ms):
        assert next_cron_due_ms(expression, at) == croniter_next(expression, at), (expression, at)


@SETTINGS
@given(expression=cron_expression(), after_ms=INSTANTS)
@example(expression="0 0 1-31 * 5", after_ms=ms("2026-01-01T00:00:30"))
@example(expression="0 0 */10 * 5", after_ms=ms("2026-01-01T00:00:30"))
def test_the_model_agrees_with_the_runtime(expression: str, after_ms: int) -> None:
    """Every drawn expression is accepted by both or rejected by both, and due at one instant."""
    try:
        parse_cron(expression)
    except InvalidCron:
        with pytest.raises(InvalidCronExpression):
            next_cron_time_ms(expression, after_ms)
        return
    for at in drawn_cases(expression, after_ms):
        assert next_cron_due_ms(expression, at) == next_cron_time_ms(expression, at) // 1000 * 1000
