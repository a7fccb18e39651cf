"""Normalisation makes the two sides' records comparable: ids as ordinals, the real side's
far-future clock shifted back to the port's, JSON cells parsed, same-instant order ignored."""

from __future__ import annotations

import json

from scenarios.diff.compare import compare
from scenarios.diff.normalise import BASE_MS, normalise


def _record(t: int, kind: str, **payload: object) -> dict:
    return {"t": t, "agent": "a", "type": kind, "payload": payload}


def test_ids_become_ordinals_in_order_of_first_appearance() -> None:
    """Two different nanoids name #1 and #2 on each side, whatever their text."""
    python = normalise(
        [
            _record(0, "fiber:run:started", fiberId="aaaaaaaaaaaaaaaaaaaaa"),
            _record(5, "fiber:run:completed", fiberId="aaaaaaaaaaaaaaaaaaaaa"),
            _record(9, "fiber:run:started", fiberId="bbbbbbbbbbbbbbbbbbbbb"),
        ],
        {},
        real=False,
    )
    ids = [payload["fiberId"] for _t, _a, _k, payload in python.records]
    assert ids == ["#1", "#1", "#2"]


def test_the_real_clock_is_shifted_back_to_the_ports() -> None:
    """Epoch ms and seconds near the real side's base read as ms and s since the run began."""
    real = normalise(
        [_record(1000, "schedule:create", at=BASE_MS + 30_000, time=BASE_MS // 1000 + 30)],
        {},
        real=True,
    )
    assert real.records[0][3] == {"at": 30_000, "time": 30}


def test_the_port_keeps_only_the_sdks_events_and_its_own_notes() -> None:
    """A port-only record (keep_alive:acquire) is dropped; an SDK event and a note stay."""
    python = normalise(
        [
            _record(0, "keep_alive:acquire", lease=1),
            _record(0, "fiber:run:started", fiberId="x" * 21),
            _record(0, "story:step", step="s1"),
        ],
        {},
        real=False,
    )
    assert [kind for _t, _a, kind, _p in python.records] == ["fiber:run:started", "story:step"]


def test_same_instant_order_is_not_compared() -> None:
    """Two records of one instant in either order agree; a different instant does not."""
    first = [_record(10, "story:a"), _record(10, "story:b")]
    swapped = [_record(10, "story:b"), _record(10, "story:a")]
    later = [_record(10, "story:a"), _record(11, "story:b")]
    left = normalise(first, {}, real=False)
    assert compare(left, normalise(swapped, {}, real=True), "s").agree
    outcome = compare(left, normalise(later, {}, real=True), "s")
    assert not outcome.agree
    assert "agentsim only: a story:b {}" in outcome.differences[0]


def test_json_cells_are_compared_as_values() -> None:
    """A JSON cell written with other spacing or key order is the same value."""
    ours = normalise([], {"a": {"story_log": [{"data": '{"a": 1, "b": [2]}'}]}}, real=False)
    theirs = normalise([], {"a": {"story_log": [{"data": '{"b":[2],"a":1}'}]}}, real=True)
    assert compare(ours, theirs, "s").agree


def test_an_id_quoted_in_a_message_is_numbered_in_place() -> None:
    """An error naming a fiber by its id reads the same on both sides once ids are ordinals;
    a long word of prose is left alone."""
    ours = normalise(
        [
            _record(0, "fiber:run:started", fiberId="Ab3defghijklmnopqrstu"),
            _record(
                1,
                "story:x",
                error="fiber f (Ab3defghijklmnopqrstu) failed in recoverability-checks",
            ),
        ],
        {},
        real=False,
    )
    theirs = normalise(
        [
            _record(0, "fiber:run:started", fiberId="Zz9yxwvutsrqponmlkjih"),
            _record(
                1,
                "story:x",
                error="fiber f (Zz9yxwvutsrqponmlkjih) failed in recoverability-checks",
            ),
        ],
        {},
        real=True,
    )
    assert ours.records[1][3] == {"error": "fiber f (#1) failed in recoverability-checks"}
    assert compare(ours, theirs, "s").agree


def test_json_text_in_a_frame_is_parsed_so_only_its_values_count() -> None:
    """A chunk body is JSON text: Python writes `1.0`, JavaScript `1`, and a time inside it is
    the real clock's; parsed, the two agree, and another value inside it differs."""
    body = '{"data": {"fraction": 1.0, "at": 60000}}'
    real_body = json.dumps({"data": {"fraction": 1, "at": BASE_MS + 60_000}})
    python = normalise([_record(0, "harness:frame", body=body)], {}, real=False)
    real = normalise([_record(0, "harness:frame", body=real_body)], {}, real=True)
    assert python.records == real.records
    other = real_body.replace('"fraction": 1', '"fraction": 0.5')
    assert compare(
        python, normalise([_record(0, "harness:frame", body=other)], {}, True), "s"
    ).differences


def test_a_null_field_reads_as_an_absent_one() -> None:
    """The port writes `reason: None` where the SDK leaves the field out; a field present with a
    value on one side only still differs."""
    python = normalise([_record(0, "agent_tool:recovery:row", runId="r", reason=None)], {}, False)
    real = normalise([_record(0, "agent_tool:recovery:row", runId="r")], {}, real=True)
    assert python.records == real.records
    given = normalise([_record(0, "agent_tool:recovery:row", runId="r", reason="x")], {}, True)
    assert python.records != given.records


def test_a_random_id_of_lowercase_letters_is_numbered_and_the_sdks_names_are_kept() -> None:
    """A schedule id such as `whztwzfap` (nine random letters that happen to be lowercase) is an
    id like any other; only the SDK's own `cf_*` names under an id key stay as they are."""
    story = normalise(
        [
            _record(0, "schedule:create", id="whztwzfap", callback="tick"),
            _record(1, "schedule:create", id="Q3x_9aZ-k", callback="tick"),
        ],
        {"a": {"cf_agents_state": [{"id": "cf_state_row_id", "state": "{}"}]}},
        real=True,
    )
    assert [payload["id"] for _t, _a, _k, payload in story.records] == ["#1", "#2"]
    assert story.tables["a"]["cf_agents_state"][0]["id"] == "cf_state_row_id"


def test_a_job_rows_wall_clock_created_at_is_not_compared() -> None:
    """0.32.0's `cf_agents_jobs.created_at` is SQLite's `unixepoch()`, the machine's clock on the
    real side: two plays a second apart agree, and every other cell of the row still counts."""
    row = {"id": "j1", "fn": "digest", "time": BASE_MS + 60_000}
    first = normalise([], {"a": {"cf_agents_jobs": [{**row, "created_at": 1796602544}]}}, real=True)
    later = normalise([], {"a": {"cf_agents_jobs": [{**row, "created_at": 1796602545}]}}, real=True)
    assert compare(first, later, "s").agree
    other = normalise(
        [], {"a": {"cf_agents_jobs": [{**row, "fn": "other", "created_at": 1}]}}, real=True
    )
    assert not compare(first, other, "s").agree
