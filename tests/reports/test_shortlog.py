"""The short log: one line per record, fixed columns, the useful fields of each event."""

from __future__ import annotations

from typing import Any

import pytest

from reports import render_short_log
from reports.shortlog import AGENT_WIDTH, EVENT_WIDTH, INC_WIDTH, TIME_WIDTH, detail, tail
from tests.reports.helpers import CHILD, P, frame, library_run, rec, story

AGENT_AT = TIME_WIDTH + 2
INC_AT = AGENT_AT + AGENT_WIDTH + 2
EVENT_AT = INC_AT + INC_WIDTH + 2
DETAIL_AT = EVENT_AT + EVENT_WIDTH + 2


def columns(line: str, time_width: int = TIME_WIDTH) -> tuple[str, str, str, str, str]:
    shift = time_width - TIME_WIDTH
    return (
        line[:time_width],
        line[AGENT_AT + shift : AGENT_AT + shift + AGENT_WIDTH].rstrip(),
        line[INC_AT + shift : INC_AT + shift + INC_WIDTH].rstrip(),
        line[EVENT_AT + shift : EVENT_AT + shift + EVENT_WIDTH].rstrip(),
        line[DETAIL_AT + shift :],
    )


def test_each_record_is_one_line_in_fixed_columns() -> None:
    """Time, agent, incarnation, event and detail sit at the same offsets on every line."""
    records = story()
    lines = render_short_log(records).split("\n")
    assert len(lines) == len(records)
    assert columns(lines[1]) == ("00:00:00.000", P, "#1", "incarnation:start", "trigger=get")
    assert columns(lines[0]) == ("00:00:00.000", "(platform)", "-", "simulation:start", "seed=42")
    assert columns(lines[16]) == ("00:01:10.000", P, "#1", "incarnation:end", "reason=deploy")
    assert columns(lines[5])[1] == CHILD
    assert all(line[EVENT_AT - 2 : EVENT_AT] == "  " for line in lines)


def test_a_header_names_the_columns() -> None:
    """With `header=True` the first line names the five columns at their offsets."""
    first = render_short_log(story(), header=True).split("\n")[0]
    assert first.split() == ["TIME", "AGENT", "INC", "EVENT", "DETAIL"]
    assert first.index("EVENT") == EVENT_AT and first.index("DETAIL") == DETAIL_AT


def test_time_past_a_day_carries_days_and_widens_the_column_for_every_line() -> None:
    """`1d02:03:04.005` past the first day; every line's columns move right together."""
    records = [rec(0, 5, "A/a", 1, "rpc", method="x"), rec(1, 93_784_005, "A/a", 1, "rpc")]
    lines = render_short_log(records).split("\n")
    assert lines[1].startswith("1d02:03:04.005  A/a")
    assert lines[0].startswith("  00:00:00.005  A/a")
    assert columns(lines[0], 14)[3:] == ("rpc", "method=x")


def test_a_long_agent_path_keeps_its_root_and_leaf() -> None:
    """Middle segments of a long path give way first, then the front of what is left."""
    nested = "Orchestrator/main/Researcher/topic-42/Summariser/s1"
    line = render_short_log([rec(0, 0, nested, 3, "rpc")])
    assert columns(line)[1] == "Orchestrator/main/…/s1"
    assert columns(line)[2] == "#3"
    lone = "A" * 40 + "/b"
    assert columns(render_short_log([rec(0, 0, lone, 1, "rpc")]))[1] == "…" + lone[-27:]


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (rec(0, 0, P, 1, "incarnation:end", reason="alarm-limit"), "reason=alarm-limit"),
        (rec(0, 0, P, 1, "alarm:set", at=600_000), "at=00:10:00.000"),
        (rec(0, 0, P, 1, "alarm:retry", at=7000, attempt=2), "attempt=2 at=00:00:07.000"),
        (rec(0, 0, P, 1, "alarm:killed", limit_ms=900_000, attempt=0), "attempt=0 limit_ms=900000"),
        (
            rec(
                0,
                0,
                P,
                1,
                "fiber:run:failed",
                elapsedMs=5,
                error="rate limited",
                fiberId="f",
                fiberName="bad",
                managed=True,
            ),
            'fiberName=bad fiberId=f error="rate limited" elapsedMs=5 managed=true',
        ),
        (
            rec(
                0,
                0,
                P,
                1,
                "hook:on_finish",
                callback="done",
                status="completed",
                slot="finish",
                runId="r1",
            ),
            "runId=r1 slot=finish status=completed callback=done",
        ),
        (
            rec(
                0,
                0,
                P,
                1,
                "connection:frame",
                connection="c1",
                frame=frame("r1", "interrupted", 4, reason="budget-exceeded", error="too slow"),
            ),
            "connection=c1 frame=agent-tool-event:interrupted runId=r1 sequence=4 "
            'parentToolCallId=tc error="too slow" reason=budget-exceeded',
        ),
        (
            rec(
                0, 0, P, 1, "connection:frame", connection="c1", frame={"type": "cf_state", "n": 1}
            ),
            "connection=c1 frame=cf_state n=1",
        ),
        (
            rec(0, 0, P, 1, "fault:armed", skip=2, count=1, kind="crash", match="INSERT"),
            "kind=crash match=INSERT skip=2 count=1",
        ),
        (
            rec(0, 0, P, 1, "schedule:retry", maxAttempts=3, id="s1", callback="tick", attempt=2),
            "callback=tick id=s1 attempt=2 maxAttempts=3",
        ),
        (rec(0, 0, P, 1, "request", path="/", method="GET"), "method=GET path=/"),
        (
            rec(0, 0, P, 1, "user:custom", zeta=1, alpha=[1, 2], beta={"b": 1, "a": 2}),
            'alpha=[1,2] beta={"a":2,"b":1} zeta=1',
        ),
        (rec(0, 0, P, 1, "startup:begin"), ""),
    ],
)
def test_detail_shows_the_lead_fields_first_then_the_rest_by_name(
    record: dict[str, object], expected: str
) -> None:
    """Each family's most useful fields lead, in a fixed order; the others follow sorted."""
    assert detail(record) == expected


def test_values_stay_on_one_line_and_are_cut_at_sixty_characters() -> None:
    """A newline in a value is escaped, and a long value ends in `…` (uncut when asked)."""
    record = rec(0, 0, P, 1, "console:error", message="line one\nline two")
    assert detail(record) == 'message="line one\\nline two"'
    long = rec(0, 0, P, 1, "console:warn", message="x" * 100)
    shown = detail(long).removeprefix("message=")
    assert len(shown) == 60 and shown.endswith("…")
    assert detail(long, None) == "message=" + "x" * 100
    assert "\n" not in render_short_log([rec(0, 0, "A/a\nb", 1, "ev\nil")])


def test_tail_is_the_last_lines() -> None:
    """`tail` keeps the last `count` records' lines."""
    records = story()
    lines = tail(records, 3).split("\n")
    assert len(lines) == 3 and "quiesce:end" in lines[-1]
    assert tail(records, 0) == ""


def test_a_real_run_reads_as_expected() -> None:
    """The short log of a library run shows its eviction and its wake-up by the alarm."""
    text = render_short_log(library_run("alarm-wakes-evicted-agent").records)
    lines = text.split("\n")
    assert (
        "Counter/counter               #1    alarm:set                     at=00:10:00.000" in text
    )
    assert lines[7].startswith("00:01:18.480  Counter/counter")
    assert lines[7].endswith("incarnation:end               reason=idle")
    assert lines[8].endswith("incarnation:start             trigger=alarm")


def test_the_same_records_give_the_same_log() -> None:
    """Rendering is a pure function of the records."""
    assert render_short_log(story()) == render_short_log(story())


def _heartbeats(start_seq: int, agent: str, times: list[int]) -> list[dict[str, Any]]:
    out = []
    for n, t in enumerate(times):
        seq = start_seq + 4 * n
        out += [
            rec(seq, t, agent, 1, "alarm:fired", attempt=0),
            rec(seq + 1, t, agent, 1, "delivery:begin", trigger="alarm"),
            rec(seq + 2, t, agent, 1, "alarm:set", at=t + 2000),
            rec(seq + 3, t, agent, 1, "alarm:done", attempt=0),
        ]
    return out


def test_the_failure_view_folds_repeated_heartbeats_into_one_line() -> None:
    """Three heartbeats in a row are one line; the render of goldens is unchanged."""
    from reports.shortlog import failure_view

    records = [rec(0, 0, "W/w", 1, "rpc", method="go")]
    records += _heartbeats(1, "W/w", [2000, 4000, 6000])
    records += [rec(13, 6000, "W/w", 1, "story:step", step=1)]
    view = failure_view(records, 20)
    assert len(view.lines) == 3 and view.heartbeats_folded == 3 and view.records_shown == 14
    assert (
        "3 keepAlive heartbeats of W/w folded (00:00:02.000 to 00:00:06.000, 12 records"
        in (view.lines[1])
    )
    assert len(render_short_log(records).splitlines()) == 14


def test_the_failure_view_keeps_a_named_record_and_a_lone_heartbeat() -> None:
    """A heartbeat holding a record the failure names is shown whole, as is a single one; a
    named record and a deploy before the window are listed apart."""
    from reports.shortlog import failure_view

    records = [rec(0, 0, "W/w", 1, "user:bad"), rec(1, 0, "", 0, "platform:deploy")]
    records += _heartbeats(2, "W/w", [2000, 4000, 6000])
    records += [rec(14, 7000, "W/w", 1, "story:step")] + _heartbeats(15, "W/w", [8000])
    named_inside = failure_view(records, 20, keep={7})  # seq 7: the second heartbeat's set
    assert named_inside.heartbeats_folded == 0
    assert sum("alarm:fired" in line for line in named_inside.lines) == 4
    view = failure_view(records, 5, keep={0})
    assert view.heartbeats_folded == 0  # the three folded fall before; the lone fourth is whole
    assert sum("alarm:fired" in line for line in view.lines) == 1
    assert len(view.earlier) == 2
    assert "user:bad" in view.earlier[0] and "platform:deploy" in view.earlier[1]
