"""Trace records are written as values the cyclic collector does not track, made `TraceRecord`
objects once when first read, and their lines and digest do not depend on when they were read."""

from __future__ import annotations

import gc

from sim import Trace
from sim.trace import TraceRecord


def fill(trace: Trace, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        trace.add(n, f"A/a{n % 7}", 1, "user:e", {"n": n, "s": "x" * (n % 5), "nothing": None})


def test_written_records_add_nothing_for_the_collector_to_scan() -> None:
    trace = Trace()
    gc.collect()
    before = len(gc.get_objects())
    fill(trace, 10_000)
    gc.collect()  # what a young collection does to a tuple of atoms: it stops tracking it
    assert len(gc.get_objects()) - before < 1_000
    assert len(trace) == 10_000


def test_records_are_made_once_when_read_and_keep_their_identity() -> None:
    trace = Trace()
    fill(trace, 5)
    first = trace.records[3]
    assert isinstance(first, TraceRecord)
    assert (first.seq, first.t_ms, first.agent, first.event) == (3, 3, "A/a3", "user:e")
    assert first.fields == {"n": 3, "s": "xxx", "nothing": None}
    fill(trace, 5, start=5)
    assert trace.records[3] is first
    assert [r.seq for r in trace] == list(range(10))
    assert trace.select("user:e", agent="A/a2", n=9) == [trace.records[9]]


def test_lines_and_digest_do_not_depend_on_when_records_were_read() -> None:
    unread, read = Trace(), Trace()
    for part in range(4):
        fill(unread, 250, start=part * 250)
        fill(read, 250, start=part * 250)
        assert len(read.records[:]) == (part + 1) * 250  # read now: records made in between
        read.digest()
    fill(unread, 1, start=1000)
    unread.add(1, "B/b", 2, "e", {"nested": {"b": [1, (2, 3)]}, "set": {2, 1}})
    fill(read, 1, start=1000)
    read.add(1, "B/b", 2, "e", {"nested": {"b": [1, (2, 3)]}, "set": {2, 1}})
    assert list(unread.lines()) == list(read.lines()) == [r.to_json() for r in read.records]
    assert unread.digest() == read.digest()
    assert unread.records == read.records


def test_a_record_replaced_after_its_line_was_made_starts_the_lines_over() -> None:
    trace = Trace()
    fill(trace, 3)
    before = trace.digest()
    trace.records[1] = TraceRecord(1, 1, "A/a1", 1, "user:other", {})
    assert trace.digest() != before
    assert list(trace.lines())[1] == trace.records[1].to_json()
    del trace.records[2]
    assert len(list(trace.lines())) == 2


def test_an_observer_gets_the_record_that_reading_gives_later() -> None:
    trace = Trace()
    seen: list[TraceRecord] = []
    fill(trace, 2)
    stop = trace.subscribe(seen.append)
    fill(trace, 2, start=2)
    stop()
    fill(trace, 1, start=4)
    assert [r.seq for r in seen] == [2, 3]
    assert trace.records[2] is seen[0] and trace.records[3] is seen[1]
    assert trace.append(5, "", 0, "e", {}) is trace.records[-1]
