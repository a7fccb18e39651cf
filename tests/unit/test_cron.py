"""Behaviour of ``agents_core.cron``: the cron syntax the SDK's ``cron-schedule`` accepts, and the
next occurrence strictly after an instant, checked by example and against a brute-force search."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_core import cron
from agents_core.cron import CronExpression, InvalidCronExpression, next_cron_time_ms, parse_cron


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    return calendar.timegm((year, month, day, hour, minute, second)) * 1000


def nxt(expression: str, *start: int, plus_ms: int = 0) -> datetime:
    """The next occurrence after the UTC time ``start`` (+ ``plus_ms``), as a datetime to read."""
    result_ms = next_cron_time_ms(expression, utc_ms(*start) + plus_ms)
    return datetime.fromtimestamp(result_ms / 1000, UTC).replace(tzinfo=None)


# --- public surface -------------------------------------------------------------------------


def test_public_api_is_pinned() -> None:
    """The module exports exactly the parser, the expression, the error and the helper."""
    assert sorted(cron.__all__) == [
        "CronExpression",
        "InvalidCronExpression",
        "next_cron_time_ms",
        "parse_cron",
    ]


def test_parse_keeps_source_and_sorted_field_values() -> None:
    """A parsed expression keeps its text and each field's allowed values in ascending order."""
    parsed = parse_cron("5,1 */6 10-12 jan,mar 5,1")
    assert parsed == CronExpression(
        source="5,1 */6 10-12 jan,mar 5,1",
        seconds=(0,),
        minutes=(1, 5),
        hours=(0, 6, 12, 18),
        days_of_month=(10, 11, 12),
        months=(1, 3),
        days_of_week=(1, 5),
    )


def test_parsed_expression_is_immutable() -> None:
    """A CronExpression is frozen, so a schedule row cannot have its cron changed under it."""
    parsed = parse_cron("* * * * *")
    with pytest.raises(AttributeError):
        parsed.minutes = (1,)  # type: ignore[misc]


# --- syntax forms ---------------------------------------------------------------------------


def test_every_minute_fires_on_the_next_whole_minute() -> None:
    """'* * * * *' from the middle of a minute fires at the start of the next one."""
    assert nxt("* * * * *", 2024, 5, 1, 10, 5, 30, plus_ms=500) == datetime(2024, 5, 1, 10, 6)


def test_next_is_strictly_after_an_exact_occurrence() -> None:
    """Asking from exactly an occurrence returns the following one, not the same instant."""
    assert nxt("*/5 * * * *", 2020, 11, 20, 17, 35) == datetime(2020, 11, 20, 17, 40)
    assert nxt("*/5 * * * *", 2020, 11, 20, 17, 35, plus_ms=-1) == datetime(2020, 11, 20, 17, 35)


def test_readme_example_of_cron_schedule() -> None:
    """cron-schedule's README example: '*/5 * * * *' after 17:32 gives 17:35."""
    assert nxt("*/5 * * * *", 2020, 11, 20, 17, 32) == datetime(2020, 11, 20, 17, 35)


def test_single_values_pick_one_instant_per_day() -> None:
    """'30 9 * * *' fires at 09:30 today if still ahead, else tomorrow."""
    assert nxt("30 9 * * *", 2024, 5, 1, 8, 0) == datetime(2024, 5, 1, 9, 30)
    assert nxt("30 9 * * *", 2024, 5, 1, 9, 30) == datetime(2024, 5, 2, 9, 30)


def test_lists_fire_on_each_listed_value() -> None:
    """'0,20,40 * * * *' fires at :00, :20 and :40."""
    assert parse_cron("0,20,40 * * * *").minutes == (0, 20, 40)
    assert nxt("0,20,40 * * * *", 2024, 5, 1, 10, 21) == datetime(2024, 5, 1, 10, 40)
    assert nxt("0,20,40 * * * *", 2024, 5, 1, 10, 40) == datetime(2024, 5, 1, 11, 0)


def test_ranges_are_inclusive_at_both_ends() -> None:
    """'0 9-17 * * *' fires every hour from 09:00 to 17:00 inclusive, then waits for tomorrow."""
    assert parse_cron("0 9-17 * * *").hours == tuple(range(9, 18))
    assert nxt("0 9-17 * * *", 2024, 5, 1, 17, 0) == datetime(2024, 5, 2, 9, 0)


def test_single_value_range_is_allowed() -> None:
    """A range whose ends are equal ('5-5') is one value, as in cron-schedule 3.0.5 and later."""
    assert parse_cron("5-5 * * * *").minutes == (5,)


def test_steps_on_star_start_at_the_field_minimum() -> None:
    """'*/15' is 0,15,30,45 for minutes and '*/5' is 1,6,...,31 for days of the month."""
    assert parse_cron("*/15 * * * *").minutes == (0, 15, 30, 45)
    assert parse_cron("0 0 */5 * *").days_of_month == (1, 6, 11, 16, 21, 26, 31)


def test_steps_on_ranges_start_at_the_range_start() -> None:
    """'10-30/10' is 10,20,30 and a step longer than the range keeps only its start."""
    assert parse_cron("10-30/10 * * * *").minutes == (10, 20, 30)
    assert parse_cron("10-30/100 * * * *").minutes == (10,)
    assert nxt("10-30/10 * * * *", 2024, 5, 1, 10, 30) == datetime(2024, 5, 1, 11, 10)


def test_lists_may_mix_values_ranges_and_steps() -> None:
    """'1-3,7,40-59/10' unions its parts, and a repeated value counts once."""
    assert parse_cron("1-3,7,40-59/10,2 * * * *").minutes == (1, 2, 3, 7, 40, 50)


def test_leading_zeros_are_plain_numbers() -> None:
    """'05' is minute 5."""
    assert parse_cron("05 * * * *").minutes == (5,)


def test_runs_of_spaces_separate_fields_like_single_spaces() -> None:
    """cron-schedule drops empty pieces after splitting on ' ', so extra spaces are harmless."""
    assert parse_cron("  0   12 * * *  ").hours == (12,)


# --- names and weekday 7 --------------------------------------------------------------------


def test_month_names_in_any_case_and_in_ranges() -> None:
    """Month names jan-dec work in any case, alone, in lists and as range ends."""
    assert parse_cron("0 0 1 JAN,mAr *").months == (1, 3)
    assert parse_cron("0 0 1 jun-AUG *").months == (6, 7, 8)
    assert parse_cron("0 0 1 dec *").months == (12,)


def test_weekday_names_in_any_case_and_in_ranges() -> None:
    """'mon-fri' is Monday to Friday, and names are case-insensitive."""
    assert parse_cron("0 9 * * Mon-FRI").days_of_week == (1, 2, 3, 4, 5)
    assert parse_cron("0 9 * * sat,sun").days_of_week == (0, 6)
    # 2024-05-03 is a Friday: the next weekday 09:00 after Friday 10:00 is Monday.
    assert nxt("0 9 * * mon-fri", 2024, 5, 3, 10, 0) == datetime(2024, 5, 6, 9, 0)


def test_weekday_seven_is_sunday() -> None:
    """Day-of-week 7 is Sunday, the same as 0."""
    assert parse_cron("0 0 * * 7").days_of_week == (0,)
    assert parse_cron("0 0 * * 5-7").days_of_week == (0, 5, 6)
    # 2024-05-01 is a Wednesday; the next Sunday is 2024-05-05.
    assert nxt("0 0 * * 7", 2024, 5, 1) == datetime(2024, 5, 5)


def test_sunday_at_the_start_of_a_weekday_range_opens_the_week() -> None:
    """As in cron-schedule, 'sun-wed' and '7-3' are Sunday to Wednesday, 'sun-sun' only Sunday."""
    assert parse_cron("0 0 * * sun-wed").days_of_week == (0, 1, 2, 3)
    assert parse_cron("0 0 * * 7-3").days_of_week == (0, 1, 2, 3)
    assert parse_cron("0 0 * * sun-sun").days_of_week == (0,)
    assert parse_cron("0 0 * * sun-sat/2").days_of_week == (0, 2, 4, 6)


def test_weekday_steps_over_star_cover_zero_to_seven() -> None:
    """'*/2' on weekdays walks 0..7, and '*/7' is just Sunday (0 and 7)."""
    assert parse_cron("0 0 * * */2").days_of_week == (0, 2, 4, 6)
    assert parse_cron("0 0 * * */7").days_of_week == (0,)


# --- day of month and day of week -----------------------------------------------------------


def test_only_day_of_month_restricted_ignores_weekday() -> None:
    """'0 0 13 * *' fires on the 13th whatever weekday it is."""
    assert nxt("0 0 13 * *", 2024, 1, 1) == datetime(2024, 1, 13)


def test_only_day_of_week_restricted_ignores_day_of_month() -> None:
    """'0 0 * * 5' fires on every Friday."""
    assert nxt("0 0 * * 5", 2024, 1, 1) == datetime(2024, 1, 5)


def test_both_day_fields_restricted_fire_when_either_matches() -> None:
    """'0 0 13 * 5' fires on every Friday and on every 13th (crontab(5) OR rule)."""
    # 2024-01-01 is a Monday: Friday the 5th comes before the 13th (a Saturday).
    assert nxt("0 0 13 * 5", 2024, 1, 1) == datetime(2024, 1, 5)
    assert nxt("0 0 13 * 5", 2024, 1, 12) == datetime(2024, 1, 13)
    assert nxt("0 0 13 * 5", 2024, 1, 13) == datetime(2024, 1, 19)


def test_full_range_day_of_month_counts_as_unrestricted() -> None:
    """'1-31' allows every day, so with a weekday only the weekday decides (no OR)."""
    # 2024-01-01 is a Monday; the next Monday after it is the 8th, not the 2nd.
    assert nxt("0 0 1-31 * 1", 2024, 1, 1) == datetime(2024, 1, 8)


def test_full_weekday_range_counts_as_unrestricted() -> None:
    """'0-6' and '0-7' allow every weekday, so only the day of month decides."""
    assert nxt("0 0 13 * 0-6", 2024, 1, 1) == datetime(2024, 1, 13)
    assert nxt("0 0 13 * 0-7", 2024, 1, 1) == datetime(2024, 1, 13)


def test_stepped_day_of_month_counts_as_restricted() -> None:
    """'*/2' is not every day, so with a weekday the OR rule applies (cron-schedule looks at the
    set of values, not at whether the field starts with '*')."""
    # 2024-01-02 is a Tuesday and not odd: it fires because it is a Tuesday.
    assert nxt("0 0 */2 * 2", 2024, 1, 1) == datetime(2024, 1, 2)
    assert nxt("0 0 */2 * 2", 2024, 1, 2) == datetime(2024, 1, 3)


# --- rollover and calendar ------------------------------------------------------------------


def test_hour_and_day_rollover() -> None:
    """After the last allowed time of a day the next occurrence is the first one tomorrow."""
    assert nxt("15,45 8,20 * * *", 2024, 5, 1, 20, 45) == datetime(2024, 5, 2, 8, 15)


def test_month_and_year_rollover() -> None:
    """New Year: '0 0 1 1 *' and '59 23 31 12 *' roll into the next year."""
    assert nxt("0 0 1 1 *", 2024, 12, 31, 23, 59, 59) == datetime(2025, 1, 1)
    assert nxt("59 23 31 12 *", 2024, 12, 31, 23, 59) == datetime(2025, 12, 31, 23, 59)
    assert nxt("* * * * *", 2024, 12, 31, 23, 59) == datetime(2025, 1, 1, 0, 0)


def test_day_31_skips_shorter_months() -> None:
    """'0 0 31 * *' skips April (30 days) and fires on May 31st."""
    assert nxt("0 0 31 * *", 2024, 4, 1) == datetime(2024, 5, 31)


def test_listed_months_skip_to_the_next_listed_month() -> None:
    """'0 0 1 3,9 *' from April fires on September 1st, and from October on next March 1st."""
    assert nxt("0 0 1 3,9 *", 2024, 4, 1) == datetime(2024, 9, 1)
    assert nxt("0 0 1 3,9 *", 2024, 10, 1) == datetime(2025, 3, 1)


def test_february_29th_waits_for_a_leap_year() -> None:
    """'0 0 29 2 *' fires only in leap years: 2028 after 2024, and 2104 after 2096 (2100 is not)."""
    assert nxt("0 0 29 2 *", 2024, 3, 1) == datetime(2028, 2, 29)
    assert nxt("0 0 29 2 *", 2096, 3, 1) == datetime(2104, 2, 29)
    assert nxt("0 0 29 2 *", 2000, 1, 1) == datetime(2000, 2, 29)


def test_last_day_of_february_in_leap_and_common_years() -> None:
    """'0 0 * 2 *' walks through Feb 28th into 29th only in a leap year."""
    assert nxt("0 0 * 2 *", 2024, 2, 28) == datetime(2024, 2, 29)
    assert nxt("0 0 * 2 *", 2023, 2, 28) == datetime(2024, 2, 1)


def test_instants_before_the_epoch() -> None:
    """Negative milliseconds are ordinary instants before 1970."""
    assert next_cron_time_ms("0 0 1 1 *", -1) == 0
    assert next_cron_time_ms("* * * * *", -90_000) == -60_000


# --- six fields (seconds) -------------------------------------------------------------------


def test_six_fields_put_seconds_first() -> None:
    """With six fields the first is seconds: '30 0 12 * * *' is 12:00:30 daily."""
    assert parse_cron("30 0 12 * * *").seconds == (30,)
    assert nxt("30 0 12 * * *", 2024, 5, 1, 12, 0, 30) == datetime(2024, 5, 2, 12, 0, 30)


def test_five_fields_fire_on_second_zero() -> None:
    """A 5-field expression has seconds (0,), so it fires on whole minutes."""
    assert parse_cron("* * * * *").seconds == (0,)


def test_every_second_fires_on_the_next_whole_second() -> None:
    """'* * * * * *' fires on the next whole second, across a minute boundary too."""
    assert nxt("* * * * * *", 2024, 5, 1, 10, 0, 5, plus_ms=500) == datetime(2024, 5, 1, 10, 0, 6)
    assert nxt("* * * * * *", 2024, 5, 1, 10, 0, 59) == datetime(2024, 5, 1, 10, 1, 0)


def test_second_steps() -> None:
    """'*/10 * * * * *' fires every ten seconds."""
    assert nxt("*/10 * * * * *", 2024, 5, 1, 10, 0, 5) == datetime(2024, 5, 1, 10, 0, 10)
    assert nxt("*/10 * * * * *", 2024, 5, 1, 10, 0, 50) == datetime(2024, 5, 1, 10, 1, 0)


# --- nicknames ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nickname", "expression"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@minutely", "* * * * *"),
        ("@Daily", "0 0 * * *"),
    ],
)
def test_nicknames_expand_to_their_expressions(nickname: str, expression: str) -> None:
    """Each nickname (any case) parses to the same fields as its 5-field expression."""
    parsed = parse_cron(nickname)
    assert parsed.source == nickname
    expanded = parse_cron(expression)
    assert (parsed.minutes, parsed.hours, parsed.days_of_month) == (
        expanded.minutes,
        expanded.hours,
        expanded.days_of_month,
    )
    assert (parsed.months, parsed.days_of_week, parsed.seconds) == (
        expanded.months,
        expanded.days_of_week,
        expanded.seconds,
    )


def test_monthly_fires_on_the_first_of_every_month() -> None:
    """'@monthly' is midnight on the 1st of each month, not once a year."""
    assert nxt("@monthly", 2024, 1, 31) == datetime(2024, 2, 1)


# --- invalid input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "61 * * * *",
            r"^invalid cron expression '61 \* \* \* \*': minute field value 61 is "
            r"out of range 0-59$",
        ),
        ("60 * * * * *", "second field value 60 is out of range 0-59"),
        ("* 24 * * *", "hour field value 24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month field value 0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month field value 32 is out of range 1-31"),
        ("* * * 0 *", "month field value 0 is out of range 1-12"),
        ("* * * 13 *", "month field value 13 is out of range 1-12"),
        ("* * * * 8", "day-of-week field value 8 is out of range 0-7"),
        ("4-60 * * * *", "minute field value 60 is out of range 0-59"),
    ],
)
def test_out_of_range_values_name_field_value_and_range(expression: str, message: str) -> None:
    """A value outside its field's range is rejected with the field, the value and the range."""
    with pytest.raises(InvalidCronExpression, match=message):
        parse_cron(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "expected 5 fields .* or 6 with a seconds field first, got 0"),
        ("0 0 0 0", "got 4"),
        ("* * * * * * *", "got 7"),
        ("0\t* * * *", "got 4"),
        (" @daily", "got 1"),
    ],
)
def test_wrong_field_count_is_rejected(expression: str, message: str) -> None:
    """Only 5 or 6 space-separated fields parse; a tab is not a separator."""
    with pytest.raises(InvalidCronExpression, match=message):
        parse_cron(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("-1 * * * *", r"minute field value '-1' is not a number 0-59; a field takes '\*'"),
        ("** * * * *", r"minute field value '\*\*' is not a number 0-59"),
        ("0,, * * * *", r"minute field value '' is not a number 0-59"),
        ("2-abc * * * *", r"minute field value 'abc' is not a number 0-59"),
        ("1.5 * * * *", r"minute field value '1.5' is not a number 0-59"),
        ("5abc * * * *", r"minute field value '5abc' is not a number 0-59"),
        ("mon * * * *", r"minute field value 'mon' is not a number 0-59;"),
        ("* * * mon *", r"month field value 'mon' is not a number 1-12 or a name jan-dec"),
        ("* * * * jan", r"day-of-week field value 'jan' is not a number 0-7 or a name mon-sun"),
        ("* * ? * *", r"value '\?' is not a number 1-31 \(cron-schedule has no '\?', 'L', 'W'"),
        ("* * L * *", r"value 'L' is not a number 1-31 \(cron-schedule has no"),
        ("* * 15W * *", r"value '15W' is not a number 1-31 \(cron-schedule has no"),
        (
            "* * * * 5#3",
            r"value '5#3' is not a number 0-7 or a name mon-sun \(cron-schedule has no",
        ),
        ("*/0 * * * *", r"minute field step '0' in '\*/0' must be a whole number >= 1"),
        ("*/ * * * *", r"minute field step '' in '\*/' must be a whole number >= 1"),
        ("*/* * * * *", r"minute field step '\*' in '\*/\*' must be a whole number >= 1"),
        ("5-1 * * * *", r"minute field range '5-1' runs from 5 down to 1; write the smaller"),
        ("* * * dec-jan *", r"month field range 'dec-jan' runs from 12 down to 1"),
        ("5/15 * * * *", r"'5/15' puts a step on a single value; .* e\.g\. '\*/15' or '5-59/15'"),
        ("@reboot", r"unknown nickname '@reboot'; allowed: @yearly, @annually, @monthly"),
    ],
)
def test_malformed_fields_say_what_is_allowed(expression: str, message: str) -> None:
    """Garbage, unsupported Quartz syntax, bad steps and backwards ranges are rejected clearly."""
    with pytest.raises(InvalidCronExpression, match=message):
        parse_cron(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "0 0 30 2 *",
            r"day-of-month field allows only 30, but the month field allows only 2 "
            r"\(at most 29 days\); no date ever matches",
        ),
        ("0 0 31 4,6,9,11 *", r"allows only 31, but the month field allows only 4,6,9,11"),
    ],
)
def test_impossible_dates_are_rejected_at_parse_time(expression: str, message: str) -> None:
    """A day of month that no allowed month has is an error, not an endless search."""
    with pytest.raises(InvalidCronExpression, match=message):
        parse_cron(expression)


def test_impossible_day_of_month_is_fine_when_a_weekday_is_also_given() -> None:
    """With a weekday restricted too, '0 0 30 2 1' fires on February Mondays (OR rule)."""
    assert nxt("0 0 30 2 1", 2024, 1, 1) == datetime(2024, 2, 5)


def test_hand_built_expression_that_never_matches_raises_instead_of_looping() -> None:
    """An expression built without parse_cron that can never match ends in a clear error."""
    never = CronExpression("hand-built", (0,), (0,), (0,), (30,), (2,), (0, 1, 2, 3, 4, 5, 6))
    with pytest.raises(InvalidCronExpression, match="'hand-built': no occurrence in the 400 years"):
        never.next_after_ms(0)


def test_non_string_expression_and_non_int_time_are_type_errors() -> None:
    """Passing a number as the expression or a float as the time is a TypeError."""
    with pytest.raises(TypeError, match="a cron expression must be a str, got int"):
        parse_cron(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after_ms must be an int of epoch milliseconds, got 1.5"):
        parse_cron("* * * * *").next_after_ms(1.5)  # type: ignore[arg-type]


def test_invalid_cron_expression_is_a_value_error() -> None:
    """Callers catching ValueError also catch a bad cron string."""
    assert issubclass(InvalidCronExpression, ValueError)


# --- property tests against a brute-force reference -----------------------------------------

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_DAYS_MAX = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


@st.composite
def _element(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...]) -> tuple[str, set[int]]:
    kind = draw(st.sampled_from(["star", "value", "range", "star_step", "range_step"]))
    if kind == "star":
        return "*", set(range(low, high + 1))
    if kind == "star_step":
        step = draw(st.integers(1, high - low + 1))
        return f"*/{step}", set(range(low, high + 1, step))
    a = draw(st.integers(low, high))
    if kind == "value":
        if names and draw(st.booleans()):
            name = names[a - low]
            return (name.upper() if draw(st.booleans()) else name), {a}
        return str(a), {a}
    b = draw(st.integers(a, high))
    if kind == "range":
        return f"{a}-{b}", set(range(a, b + 1))
    step = draw(st.integers(1, high - low + 1))
    return f"{a}-{b}/{step}", set(range(a, b + 1, step))


@st.composite
def _field(
    draw: st.DrawFn, low: int, high: int, names: tuple[str, ...] = (), star_weight: int = 0
) -> tuple[str, frozenset[int]]:
    """A field's text and the set of values it must allow, built independently of the parser."""
    if star_weight and draw(st.integers(0, 9)) < star_weight:
        return "*", frozenset(range(low, high + 1))
    parts = draw(st.lists(_element(low, high, names), min_size=1, max_size=3))
    values = frozenset().union(*(values for _, values in parts))
    return ",".join(text for text, _ in parts), values


def _weekday_field() -> st.SearchStrategy[tuple[str, frozenset[int]]]:
    return _field(0, 7, _WEEKDAYS, star_weight=6).map(
        lambda field: (field[0], frozenset(value % 7 for value in field[1]))
    )


def _matches(moment: datetime, fields: list[frozenset[int]]) -> bool:
    """The naive reference: does this UTC instant satisfy every field (crontab(5) day rule)?"""
    seconds, minutes, hours, days, months, weekdays = fields
    weekday = (moment.weekday() + 1) % 7  # Python counts from Monday = 0, cron from Sunday = 0
    by_day, by_weekday = moment.day in days, weekday in weekdays
    both_restricted = len(days) != 31 and len(weekdays) != 7
    day_ok = (by_day or by_weekday) if both_restricted else (by_day and by_weekday)
    return (
        moment.second in seconds
        and moment.minute in minutes
        and moment.hour in hours
        and moment.month in months
        and day_ok
    )


def _brute_force_first(
    after_ms: int, fields: list[frozenset[int]], step: timedelta, until: datetime
) -> datetime | None:
    """Walk forward one step at a time from the first whole step after ``after_ms``."""
    step_ms = int(step.total_seconds() * 1000)
    moment = datetime.fromtimestamp((after_ms // step_ms + 1) * step_ms / 1000, UTC)
    while moment <= until:
        if _matches(moment, fields):
            return moment
        moment += step
    return None


_starts_ms = st.builds(
    lambda moment, extra_ms: int(moment.replace(tzinfo=UTC).timestamp()) * 1000 + extra_ms,
    st.datetimes(min_value=datetime(2023, 1, 1), max_value=datetime(2030, 12, 31)),
    st.integers(0, 999),
)


def _check_against_brute_force(
    expression: str, fields: list[frozenset[int]], after_ms: int, step: timedelta, window: timedelta
) -> None:
    result_ms = next_cron_time_ms(expression, after_ms)
    result = datetime.fromtimestamp(result_ms / 1000, UTC)
    assert result_ms > after_ms
    assert _matches(result, fields), f"{expression!r} gave non-matching {result}"
    window_end = datetime.fromtimestamp(after_ms / 1000, UTC) + window
    expected = _brute_force_first(after_ms, fields, step, min(result, window_end))
    # Within the window the brute force must find exactly our answer; past it, nothing earlier.
    if result <= window_end:
        assert expected == result, f"{expression!r} after {after_ms}: {result} vs {expected}"
    else:
        assert expected is None, f"{expression!r} after {after_ms}: skipped {expected}"


@settings(max_examples=150, deadline=None)
@given(
    minute=_field(0, 59),
    hour=_field(0, 23, star_weight=3),
    day=_field(1, 31, star_weight=6),
    month=_field(1, 12, _MONTHS, star_weight=6),
    weekday=_weekday_field(),
    after_ms=_starts_ms,
)
def test_five_fields_agree_with_minute_by_minute_search(
    minute: tuple[str, frozenset[int]],
    hour: tuple[str, frozenset[int]],
    day: tuple[str, frozenset[int]],
    month: tuple[str, frozenset[int]],
    weekday: tuple[str, frozenset[int]],
    after_ms: int,
) -> None:
    """For random 5-field expressions, the answer matches and no minute before it does."""
    texts, value_sets = zip(minute, hour, day, month, weekday, strict=True)
    expression = " ".join(texts)
    fields = [frozenset({0}), *value_sets]
    longest_month = max(_MONTH_DAYS_MAX[m - 1] for m in month[1])
    if len(day[1]) != 31 and len(weekday[1]) == 7 and min(day[1]) > longest_month:
        with pytest.raises(InvalidCronExpression, match="no date ever matches"):
            parse_cron(expression)
        return
    parsed = parse_cron(expression)
    assert [set(v) for v in value_sets] == [
        set(parsed.minutes),
        set(parsed.hours),
        set(parsed.days_of_month),
        set(parsed.months),
        set(parsed.days_of_week),
    ]
    _check_against_brute_force(
        expression, fields, after_ms, timedelta(minutes=1), timedelta(days=3)
    )


@settings(max_examples=80, deadline=None)
@given(
    second=_field(0, 59),
    minute=_field(0, 59, star_weight=3),
    hour=_field(0, 23, star_weight=7),
    after_ms=_starts_ms,
)
def test_six_fields_agree_with_second_by_second_search(
    second: tuple[str, frozenset[int]],
    minute: tuple[str, frozenset[int]],
    hour: tuple[str, frozenset[int]],
    after_ms: int,
) -> None:
    """For random 6-field expressions, the answer matches and no second before it does."""
    every_day = frozenset(range(1, 32)), frozenset(range(1, 13)), frozenset(range(7))
    expression = f"{second[0]} {minute[0]} {hour[0]} * * *"
    fields = [second[1], minute[1], hour[1], *every_day]
    _check_against_brute_force(
        expression, fields, after_ms, timedelta(seconds=1), timedelta(hours=2)
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(utc_ms(1, 1, 1), utc_ms(9998, 12, 31, 23, 59, 59)))
def test_new_year_and_monday_match_the_stdlib_calendar_over_the_whole_range(after_ms: int) -> None:
    """Over years 1-9998 the integer calendar agrees with the stdlib: New Year and Mondays."""
    start = datetime(1970, 1, 1) + timedelta(milliseconds=after_ms)
    assert next_cron_time_ms("0 0 1 1 *", after_ms) == utc_ms(start.year + 1, 1, 1)
    monday_ms = next_cron_time_ms("0 0 * * 1", after_ms)
    monday = datetime(1970, 1, 1) + timedelta(milliseconds=monday_ms)
    assert monday.weekday() == 0
    assert (monday.hour, monday.minute, monday.second) == (0, 0, 0)
    assert 0 < monday_ms - after_ms <= 7 * 86_400_000
