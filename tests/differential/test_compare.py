"""The comparison reports first differences with both sides' records, and forgives only what an
allow-list entry names, each entry naming a row of docs/divergences.md."""

from __future__ import annotations

import re
from pathlib import Path

from scenarios.diff.compare import ALLOWED, Allowed, compare
from scenarios.diff.normalise import normalise

DIVERGENCES = Path(__file__).resolve().parents[2] / "docs" / "divergences.md"


def _tables(created_at: int) -> dict:
    return {
        "a": {"cf_agents_schedules": [{"id": "s1", "callback": "tick", "created_at": created_at}]}
    }


def test_every_allowed_difference_names_a_divergence_row() -> None:
    """Each allow-list entry's row id is a row of docs/divergences.md."""
    rows = set(re.findall(r"^\| ([A-Z]\d+) \|", DIVERGENCES.read_text(), flags=re.MULTILINE))
    assert ALLOWED
    assert [rule.row for rule in ALLOWED if rule.row not in rows] == []


def test_a_forgiven_column_agrees_and_names_its_row() -> None:
    """K3: the schedule row's created_at differs (real clock) and is forgiven by name."""
    ours = normalise([], _tables(5), real=False)
    theirs = normalise([], _tables(1_790_000_000), real=True)
    outcome = compare(ours, theirs, "s")
    assert outcome.agree
    assert outcome.allowed == ["K3"]


def test_without_the_allow_list_the_same_tables_differ() -> None:
    """The same tables with no allow-list differ, naming the table and both rows."""
    ours = normalise([], _tables(5), real=False)
    theirs = normalise([], _tables(1_790_000_000), real=True)
    outcome = compare(ours, theirs, "s", allowed=())
    assert not outcome.agree
    assert outcome.differences[0].startswith("table a.cf_agents_schedules:")
    assert '"created_at":5' in outcome.differences[0]


def test_a_scenario_scoped_rule_forgives_only_its_scenario() -> None:
    """A rule for one scenario does not forgive the same difference in another."""
    rule = Allowed(
        row="S1", why="test", event="fiber:recovery:failed", payload_field="status", scenario="one"
    )
    ours = normalise(
        [
            {
                "t": 0,
                "agent": "a",
                "type": "fiber:recovery:failed",
                "payload": {"status": "interrupted"},
            }
        ],
        {},
        real=False,
    )
    theirs = normalise(
        [{"t": 0, "agent": "a", "type": "fiber:recovery:failed", "payload": {"status": "error"}}],
        {},
        real=True,
    )
    assert compare(ours, theirs, "one", allowed=(rule,)).agree
    other = compare(ours, theirs, "two", allowed=(rule,))
    assert not other.agree
    assert "workerd only: a fiber:recovery:failed" in other.differences[0]


def test_connect_events_and_the_state_rows_are_compared_with_no_allowance() -> None:
    """The port emits `connect` / `disconnect` and stores the state row alone, as SDK 0.21.0
    does (no allow-list entry forgives them): a `disconnect` missing on one side, or the legacy
    `cf_state_was_changed` row left on one side, is a difference."""
    closed = {"t": 5, "agent": "a", "type": "disconnect", "payload": {"code": 1000}}
    opened = {"t": 0, "agent": "a", "type": "connect", "payload": {"connectionId": "c" * 21}}
    state = [{"id": "cf_state_row_id", "state": '{"n": 1}'}]
    legacy = [*state, {"id": "cf_state_was_changed", "state": "true"}]
    ours = normalise([opened], {"a": {"cf_agents_state": state}}, real=False)
    same = normalise([opened], {"a": {"cf_agents_state": state}}, real=True)
    assert compare(ours, same, "s").agree
    both = normalise([opened, closed], {"a": {"cf_agents_state": state}}, real=True)
    outcome = compare(ours, both, "s")
    assert not outcome.agree and outcome.allowed == []
    assert "disconnect" in outcome.differences[0]
    flagged = normalise([opened], {"a": {"cf_agents_state": legacy}}, real=True)
    outcome = compare(ours, flagged, "s")
    assert not outcome.agree and outcome.allowed == []
    assert "cf_state_was_changed" in outcome.differences[0]


def _record(kind: str, payload: dict, t: int = 0, agent: str = "a") -> dict:
    return {"t": t, "agent": agent, "type": kind, "payload": payload}


def _frame(event: dict) -> dict:
    return _record("harness:frame", {"client": "c", "frame": {"type": "agent-tool-event", **event}})


def test_the_sub_agent_identity_columns_are_forgiven_as_F9_only() -> None:
    """F9: workerd's path-v2 identity of a sub-agent is forgiven; another column of the same
    registry row (its name) is not."""
    ours = {"p": {"cf_agents_sub_agents": [{"class": "C", "name": "r1", "identity_name": None}]}}
    theirs = {"p": {"cf_agents_sub_agents": [{"class": "C", "name": "r1", "identity_name": "x"}]}}
    outcome = compare(normalise([], ours, real=False), normalise([], theirs, real=True), "s")
    assert outcome.agree and outcome.allowed == ["F9"]
    renamed = {"p": {"cf_agents_sub_agents": [{"class": "C", "name": "r2", "identity_name": "x"}]}}
    outcome = compare(normalise([], ours, real=False), normalise([], renamed, real=True), "s")
    assert not outcome.agree
    assert outcome.differences[0].startswith("table p.cf_agents_sub_agents:")


def test_a_nested_field_rule_forgives_that_field_alone() -> None:
    """S5: a chunk frame's `chunkSequence` (the port's, inside `frame.event`) is forgiven; the
    same frame with another chunk body is a difference."""
    chunk = {"kind": "chunk", "runId": "r", "body": '{"delta":"a"}'}
    ours = normalise([_frame({"event": {**chunk, "chunkSequence": 0}})], {}, real=False)
    theirs = normalise([_frame({"event": chunk})], {}, real=True)
    outcome = compare(ours, theirs, "s")
    assert outcome.agree and outcome.allowed == ["S5"]
    other = normalise([_frame({"event": {**chunk, "body": '{"delta":"b"}'}})], {}, real=True)
    assert not compare(ours, other, "s").agree


def test_a_matching_rule_forgives_only_the_records_and_rows_it_matches() -> None:
    """S7: in a give-up story the SDK's second `aborted` delivery (its frame, its hook notes, its
    story_log rows) is forgiven; a hook note of another status is still compared, and in
    another scenario nothing is forgiven."""
    scenario = "detached-budget-exceeded-gives-up-once"
    log = [{"seq": 1, "kind": "finish", "data": '{"run": "r", "status": "interrupted"}'}]
    aborted = [{"seq": 2, "kind": "finish", "data": '{"run": "r", "status": "aborted"}'}]
    ours = normalise([], {"p": {"story_log": log}}, real=False)
    extra = [
        _frame({"event": {"kind": "aborted", "runId": "r"}}),
        _record("story:finish", {"run": "r", "status": "aborted"}),
    ]
    theirs = normalise(extra, {"p": {"story_log": log + aborted}}, real=True)
    outcome = compare(ours, theirs, scenario)
    assert outcome.agree and outcome.allowed == ["S7"]
    assert not compare(ours, theirs, "another-story").agree
    completed = normalise(
        [_record("story:finish", {"run": "r", "status": "completed"})],
        {"p": {"story_log": log}},
        real=True,
    )
    outcome = compare(ours, completed, scenario)
    assert not outcome.agree and "story:finish" in outcome.differences[0]


def test_an_awaited_runs_ledger_columns_are_forgiven_but_not_a_detached_runs() -> None:
    """S8: the port's claim and delivered mark on an awaited run's row are forgiven; on a
    detached run's row, where both sides keep the ledger, they are compared."""

    def runs(detached: int, claimed: int | None) -> dict:
        row = {"run_id": "r", "detached": detached, "finish_claimed_at": claimed}
        return {"p": {"cf_agent_tool_runs": [row]}}

    awaited = compare(
        normalise([], runs(0, 5), real=False), normalise([], runs(0, None), True), "s"
    )
    assert awaited.agree and awaited.allowed == ["S8"]
    detached = compare(
        normalise([], runs(1, 5), real=False), normalise([], runs(1, None), True), "s"
    )
    assert not detached.agree


def test_a_chat_agents_stream_cleanup_alarm_is_forgiven_when_its_own_cleanup_is_due() -> None:
    """T11: the SDK's chat agent arms its alarm for the stream cleanup it scheduled when its
    stream began (due 600 s later, in whole seconds): that alarm is forgiven in any scenario;
    an alarm at another time, or one of an agent that scheduled no cleanup, is a difference."""

    def alarm(agent: str, at: int | None) -> dict:
        payload = {"step": "step 2"} if at is None else {"at": at, "step": "step 2"}
        return {"t": 2_000, "agent": agent, "type": "harness:alarm", "payload": payload}

    cleanup = {
        "t": 1_072,
        "agent": "chat",
        "type": "schedule:create",
        "payload": {"callback": "_cleanupStreamBuffers", "id": "c1"},
    }
    ours = normalise([alarm("chat", None)], {}, real=False)
    theirs = normalise([cleanup, alarm("chat", 601_000)], {}, real=True)
    outcome = compare(ours, theirs, "generated")
    assert outcome.agree and outcome.allowed == ["T11"]
    elsewhen = normalise([cleanup, alarm("chat", 602_000)], {}, real=True)
    assert not compare(ours, elsewhen, "generated").agree
    other = normalise([cleanup, alarm("other", 601_000)], {}, real=True)
    assert not compare(normalise([alarm("other", None)], {}, real=False), other, "x").agree


def test_a_sub_agents_stream_cleanup_is_forgiven_on_its_roots_alarm() -> None:
    """T11 below a root: a chat child's cleanup is due on its root's alarm (a facet's alarm is
    its root's), so the root's alarm at that time is forgiven; a sibling root's is not."""

    def alarm(agent: str, at: int | None) -> dict:
        payload = {"step": "step 2"} if at is None else {"at": at, "step": "step 2"}
        return {"t": 2_000, "agent": agent, "type": "harness:alarm", "payload": payload}

    cleanup = {
        "t": 0,
        "agent": "parent/Beta",
        "type": "schedule:create",
        "payload": {"callback": "_cleanupStreamBuffers", "id": "c1"},
    }
    ours = normalise([alarm("parent", None)], {}, real=False)
    theirs = normalise([cleanup, alarm("parent", 600_000)], {}, real=True)
    outcome = compare(ours, theirs, "generated")
    assert outcome.agree and outcome.allowed == ["T11"]
    sibling = normalise([cleanup, alarm("parent2", 600_000)], {}, real=True)
    assert not compare(normalise([alarm("parent2", None)], {}, real=False), sibling, "x").agree


def test_a_stream_cleanup_schedule_shifts_no_other_schedules_number() -> None:
    """The SDK's cleanup schedule, which the port never makes, is numbered apart: the schedules
    after it keep the numbers they have on the port's side, in the records and in the rows."""

    def create(t: int, agent: str, callback: str, sid: str) -> dict:
        payload = {"callback": callback, "id": sid}
        return {"t": t, "agent": agent, "type": "schedule:create", "payload": payload}

    def rows(*pairs: tuple[str, str]) -> dict:
        return {"w": {"cf_agents_schedules": [{"id": i, "callback": c} for i, c in pairs]}}

    ours = normalise([create(5, "w", "tick", "own1")], rows(("own1", "tick")), real=False)
    theirs = normalise(
        [create(0, "chat", "_cleanupStreamBuffers", "zz9"), create(5, "w", "tick", "sdk1")],
        rows(("sdk1", "tick")),
        real=True,
    )
    outcome = compare(ours, theirs, "generated")
    assert outcome.agree, outcome.differences
    mine = [r for r in theirs.records if r[1] == "w"]
    assert mine and mine[0][3]["id"] == "#1"


def test_a_managed_fiber_whose_hook_threw_is_forgiven_its_status_only() -> None:
    """S1: the fibers workload's throwing recovery hook leaves the row `interrupted` in the port
    and `error` in the SDK; with the hook's message on both sides the status is forgiven in any
    scenario, while another message, or another status with no such message, differs."""
    message = "fiber f1 (#3) was not recovered: the workload's recovery is throw"

    def tables(status: str, error: str | None) -> dict:
        row = {"fiber_id": "#1", "name": "f1", "status": status, "error_message": error}
        return {"worker": {"cf_agents_fibers": [row]}}

    ours = normalise([], tables("interrupted", message), real=False)
    theirs = normalise([], tables("error", message), real=True)
    outcome = compare(ours, theirs, "generated")
    assert outcome.agree and outcome.allowed == ["S1"]
    changed = normalise([], tables("error", message + "!"), real=True)
    assert not compare(
        normalise([], tables("interrupted", message + "!"), real=False), changed, "g"
    ).agree
    plain = normalise([], tables("error", None), real=True)
    assert not compare(normalise([], tables("interrupted", None), real=False), plain, "g").agree
