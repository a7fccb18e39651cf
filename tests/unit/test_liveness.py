"""The busy report: what kept a liveness phase from going quiet, in one paragraph."""

from __future__ import annotations

from sim.liveness import busy_report, format_gap
from sim.trace import TraceRecord


def rec(seq: int, t: int, agent: str, event: str, inc: int = 1, **fields: object) -> TraceRecord:
    return TraceRecord(seq, t, agent, inc, event, fields)


def test_it_names_the_busiest_agent_its_alarm_cadence_and_schedules() -> None:
    records = [
        rec(0, 0, "A/a", "keep_alive:acquire", lease=1, holder="fiber:f1"),
        rec(1, 60_000, "A/a", "alarm:fired", attempt=0),
        rec(2, 60_000, "A/a", "schedule:execute", callback="tick"),
        rec(3, 90_000, "A/a", "alarm:fired", attempt=0),
        rec(4, 90_000, "A/a", "schedule:execute", callback="tick"),
        rec(5, 120_000, "A/a", "alarm:fired", attempt=0),
        rec(6, 120_000, "A/a", "alarm:killed", attempt=0),
        rec(7, 120_000, "B/b", "fiber:run:started", fiberName="ingest"),
    ]
    text = busy_report(records, since_ms=30_000, end_ms=150_000, next_due_ms=150_500)
    assert text == (
        "the liveness phase (00:00:30.000 to 00:02:30.000) did not go quiet (the next event was "
        "due at 00:02:30.500); what kept it busy: A/a (6 records): its alarm fired 3 times "
        "(every 30s on average; killed by the 15-minute limit once), schedule callback 'tick' "
        "ran 2 times; B/b (1 records): fiber 'ingest' started once; keepAlive leases never "
        "released: A/a#1 lease 1 (fiber:f1) since 00:00:00.000"
    )


def test_a_lease_of_a_dead_incarnation_is_not_reported_as_held() -> None:
    records = [
        rec(0, 0, "A/a", "keep_alive:acquire", lease=1, holder="keep_alive"),
        rec(1, 10, "A/a", "incarnation:end", reason="deploy"),
        rec(2, 20, "A/a", "keep_alive:acquire", inc=2, lease=1, holder="keep_alive"),
        rec(3, 30, "A/a", "keep_alive:release", inc=2, lease=1, holder="keep_alive"),
    ]
    assert "leases never released" not in busy_report(records, 0, 100, 200)


def test_a_silent_phase_says_a_far_timer_keeps_it_busy() -> None:
    text = busy_report([], since_ms=0, end_ms=3_600_000, next_due_ms=86_400_000)
    assert text.startswith("the liveness phase (00:00:00.000 to 01:00:00.000) did not go quiet")
    assert "wrote no record: the next event was due at 1d00:00:00.000" in text


def test_durations_read_short() -> None:
    assert [format_gap(ms) for ms in (250, 1_500, 60_000, 904_000, 3_600_000, 5_430_000)] == [
        "250ms",
        "1.5s",
        "1m",
        "15m4s",
        "1h",
        "1h30m30s",
    ]
