"""The client's agent-tool view besides parts, and when a child's signals reach the parent's side:
`client_runs_grouped` (T-131), `client_run_terminals` (T-135, T-139), `progress_flushed` (S4)
and `milestones_before_finish` (S3). Each holds on real runs, catches a crafted breach with its
sentence, and forgives what its rule leaves out."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents_core import Agent
from sim import Simulation
from sim.checkers import CheckContext, check, context_from, reducer_promises
from sim.checkers.models.client_runs import locale_order
from sim.checkers.models.spec_constants import milestone_dedupe_key
from sim.checkers.timeline import decode_frame
from sim.client_views import client_view
from sim.sqlite import KV_TABLE
from sim.trace import TraceRecord
from tests.agent_tools.scripted_child import ScriptedChild
from tests.checkers.agents import (
    fails_with_a_blind_checker,
    record,
    renumbered,
    scenario_context,
    with_record,
    with_row,
    without,
)

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"
NAMES = [
    "client_runs_grouped",
    "client_run_terminals",
    "progress_flushed",
    "milestones_before_finish",
]
STORIES = [
    "hunt-tools-parent-awaited-detached-budgets",
    "hunt-chat-host-tools-progress-milestones",
    "progress-in-reconnecting-client",
    "milestones-narrated-and-reacted",
    "reattach-after-parent-restart",
    "cancel-detached-run-delivers-aborted-once",
    "detached-budget-exceeded-gives-up-once",
]
QUICK = [["text", "Hello "], ["sleep", 50], ["text", "world"], ["finish", "completed", "done"]]
P = "Parent/p"


def messages(context: CheckContext, name: str) -> list[str]:
    return [v.message for v in check(context, [name])]


@pytest.fixture(scope="module")
def library() -> dict[str, CheckContext]:
    return {story: scenario_context((LIBRARY / f"{story}.yaml").read_text()) for story in STORIES}


@pytest.mark.parametrize("story", STORIES)
def test_the_library_stories_keep_every_promise(
    library: dict[str, CheckContext], story: str
) -> None:
    assert check(library[story], NAMES) == []


def test_the_stories_give_each_promise_something_to_judge(
    library: dict[str, CheckContext],
) -> None:
    """Runs ending each way reach a watching client (a reconnect's replay among them), a
    coalesced value is flushed, and milestones are announced live and after a restart."""
    budgets = library["hunt-tools-parent-awaited-detached-budgets"]
    frames = [decode_frame(r.get("frame")) for r in budgets.events("connection:frame")]
    kinds = {frame["event"]["kind"] for frame in frames if frame is not None}
    assert {"started", "finished", "aborted", "interrupted"} <= kinds
    chat = library["hunt-chat-host-tools-progress-milestones"]
    assert chat.events("workload:reported", outcome="coalesced")
    narrated = library["milestones-narrated-and-reacted"]
    assert len(narrated.events("hook:milestone_delivered")) == 3


def finds(name: str) -> Callable[[CheckContext], None]:
    """A test that the checker `name` finds something in a context."""

    def test(context: CheckContext) -> None:
        assert check(context, [name])

    return test


def patched_view(monkeypatch: pytest.MonkeyPatch, change: Callable[[dict], None]) -> None:
    """What the runtime's reducer shows, changed by `change` (a reducer with a slip)."""

    def slipped(records: Any) -> dict:
        view = copy.deepcopy(client_view(records))
        change(view)
        return view

    monkeypatch.setattr(reducer_promises, "client_view", slipped)


def frames_context(*frames: dict[str, Any]) -> CheckContext:
    """One client of `P` that received `frames`, one per millisecond from 1 ms."""
    records = [record(0, 0, P, 1, "connection:open", connection="k1", client="panel")]
    records += [
        record(0, t, P, 1, "connection:frame", connection="k1", frame=frame)
        for t, frame in enumerate(frames, start=1)
    ]
    return CheckContext(records=renumbered(records))


def started(run: str, order: Any = 0, call: str | None = None, **extra: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "agent-tool-event",
        "sequence": 0,
        "event": {"kind": "started", "runId": run, "agentType": "Child", "order": order},
        **extra,
    }
    if call is not None:
        frame["parentToolCallId"] = call
    return frame


def terminal(run: str, kind: str, sequence: int, **event: Any) -> dict[str, Any]:
    return {
        "type": "agent-tool-event",
        "sequence": sequence,
        "event": {"kind": kind, "runId": run, **event},
    }


# -- client_runs_grouped (T-131) -----------------------------------------------------------------
class GroupingParent(Agent):
    """Runs scripted children under tool calls, with display orders, and unbound."""

    async def fan_out(self, specs: list[list[Any]]) -> list[Any]:
        runs = [
            self.run_agent_tool(
                ScriptedChild,
                input={"steps": QUICK},
                run_id=run_id,
                parent_tool_call_id=call,
                display_order=order,
            )
            for run_id, call, order in specs
        ]
        return [result.to_dict() for result in await self.host.tasks.gather(*runs)]


FAN_OUT = [
    ["a-run", "call-1", 1],
    ["b-run", "call-1", 0],
    ["c-run", "call-2", 0],
    ["zed", None, 0],
    ["loose", None, 0],
]


@pytest.fixture(scope="module")
def grouped() -> CheckContext:
    """A client that sees five runs: two under call-1 (order 1 and 0), one under call-2, and
    two unbound ones; it reconnects once they ended and gets their replay."""
    with Simulation(seed=3) as sim:
        ref = sim.agent(GroupingParent, "p")
        client = sim.connect(ref, "panel")
        sim.call(ref, "fan_out", FAN_OUT)
        sim.reconnect(client)
        sim.quiesce(600_000)
        return context_from(sim)


def view_of(context: CheckContext) -> dict:
    return client_view(context.events("connection:frame", "GroupingParent/p"))


def test_sibling_runs_are_grouped_by_tool_call_in_display_order(grouped: CheckContext) -> None:
    view = view_of(grouped)
    assert view["groups"] == {"call-1": ["b-run", "a-run"], "call-2": ["c-run"]}
    assert view["unbound"] == ["loose", "zed"]
    assert messages(grouped, "client_runs_grouped") == []
    assert messages(grouped, "client_run_terminals") == []


def test_a_group_out_of_display_order_is_caught(
    grouped: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    patched_view(monkeypatch, lambda view: view["groups"]["call-1"].reverse())
    assert messages(grouped, "client_runs_grouped") == [
        "client panel of GroupingParent/p lists run a-run before run b-run under tool call "
        "call-1, where their started frames (order 1 and 0) put b-run first (by order, then "
        "run id)"
    ]


def test_unbound_runs_out_of_run_id_order_are_caught(
    grouped: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    patched_view(monkeypatch, lambda view: view["unbound"].reverse())
    assert messages(grouped, "client_runs_grouped") == [
        "client panel of GroupingParent/p lists run zed before run loose as unbound runs, where "
        "their started frames (order 0 and 0) put loose first (by order, then run id)"
    ]


def test_a_run_listed_under_the_wrong_heading_is_caught(
    grouped: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unbind(view: dict) -> None:
        del view["groups"]["call-2"]
        view["unbound"].insert(0, "c-run")

    patched_view(monkeypatch, unbind)
    assert messages(grouped, "client_runs_grouped") == [
        "client panel of GroupingParent/p lists [] under tool call call-2, where the started "
        "frames it received put ['c-run'] there"
    ]


def test_a_run_the_view_lost_is_caught(
    grouped: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lose(view: dict) -> None:
        del view["runs"]["zed"]
        view["unbound"].remove("zed")

    patched_view(monkeypatch, lose)
    assert messages(grouped, "client_runs_grouped") == [
        "client panel of GroupingParent/p shows runs ['a-run', 'b-run', 'c-run', 'loose'], "
        "where the started frames it received are of runs ['a-run', 'b-run', 'c-run', "
        "'loose', 'zed']"
    ]


def test_the_grouping_checker_is_not_blind(
    grouped: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    patched_view(monkeypatch, lambda view: view["groups"]["call-1"].reverse())
    fails_with_a_blind_checker(
        monkeypatch, "client_runs_grouped", finds("client_runs_grouped"), grouped
    )


def test_a_started_after_the_terminal_moves_nothing() -> None:
    """T-137: a replayed `started` naming another tool call and order, after the run ended,
    changes neither its place nor its status; an undecidable id tie is not judged."""
    context = frames_context(
        started("r", 0, "call-1"),
        terminal("r", "finished", 1, summary="s"),
        started("r", 5, "call-9", replay=True),
        started("ab"),
        started("aB"),
    )
    assert messages(context, "client_runs_grouped") == []
    assert messages(context, "client_run_terminals") == []


def test_run_ids_tie_as_locale_compare_orders_them() -> None:
    """The model's `localeCompare`: `_`, `-`, digits, then letters, case ignored first."""
    assert locale_order("_x", "-y") == -1
    assert locale_order("1a", "a") == -1
    assert locale_order("alpha", "Beta") == -1
    assert locale_order("ab", "aB") is None
    assert locale_order("a b", "ab") is None


def test_unbound_runs_with_mixed_case_ids_follow_locale_compare() -> None:
    """The runtime once broke order ties by code point ('Beta' before 'alpha'); agent-tools §3.5
    sorts by localeCompare."""
    context = frames_context(started("alpha"), started("Beta"))
    assert messages(context, "client_runs_grouped") == []


# -- client_run_terminals (T-135, T-139) ---------------------------------------------------------
def test_each_terminal_kind_shows_its_fields() -> None:
    """finished, error, aborted, interrupted (with and without its keys), an interrupted run
    repaired by a later finished (R1), a terminal that came before its started (R2) and the same
    interrupted frame sent again after the repair."""
    context = frames_context(
        started("done"),
        terminal("done", "finished", 3, summary="all done"),
        started("failed"),
        terminal("failed", "error", 1, error="boom"),
        started("stopped"),
        terminal("stopped", "aborted", 1, reason="cancelled by the user"),
        started("cut"),
        terminal(
            "cut", "interrupted", 1, error="gone", reason="no-progress", childStillRunning=True
        ),
        started("bare"),
        terminal("bare", "interrupted", 1, error="gone"),
        started("repaired"),
        terminal("repaired", "interrupted", 5, error="x", reason="budget-exceeded"),
        terminal("repaired", "finished", 6, summary="late"),
        terminal("repaired", "interrupted", 5, error="x", reason="budget-exceeded"),
        terminal("early", "finished", 2, summary="first"),
        started("early"),
    )
    runs = client_view(context.events("connection:frame"))["runs"]
    assert {r: v["status"] for r, v in runs.items()} == {
        "done": "completed",
        "failed": "error",
        "stopped": "aborted",
        "cut": "interrupted",
        "bare": "interrupted",
        "repaired": "completed",
        "early": "completed",
    }
    assert messages(context, "client_run_terminals") == []


@pytest.mark.parametrize("kept", [True, False])
def test_an_error_after_an_interrupt_may_keep_or_clear_the_reason(
    kept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec does not say what an `error` after an `interrupted` does to the reason."""
    context = frames_context(
        started("r"),
        terminal("r", "interrupted", 1, error="x", reason="no-progress", childStillRunning=True),
        terminal("r", "error", 2, error="boom"),
    )

    def change(view: dict) -> None:
        run = view["runs"]["r"]
        run["reason"], run["childStillRunning"] = ("no-progress", True) if kept else (None, None)

    patched_view(monkeypatch, change)
    assert messages(context, "client_run_terminals") == []


@pytest.fixture(scope="module")
def budgets(library: dict[str, CheckContext]) -> CheckContext:
    return library["hunt-tools-parent-awaited-detached-budgets"]


def test_a_lost_summary_is_caught(
    library: dict[str, CheckContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    patched_view(monkeypatch, lambda view: view["runs"]["sync"].update(summary=None))
    assert messages(library["progress-in-reconnecting-client"], "client_run_terminals") == [
        "client browser of StoryParent/importer shows run sync as completed (summary null), "
        "where the last terminal frame it "
        'received (finished, at 00:04:00.000) makes it completed (summary "Imported 80k '
        'rows", error null, reason null, childStillRunning null)'
    ]


def test_an_interrupt_reason_left_on_a_repaired_run_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R1: a `finished` after an `interrupted` clears the interrupt's reason."""
    context = frames_context(
        started("r"),
        terminal("r", "interrupted", 1, error="x", reason="no-progress", childStillRunning=True),
        terminal("r", "finished", 2, summary="late"),
    )
    patched_view(
        monkeypatch,
        lambda view: view["runs"]["r"].update(reason="no-progress", childStillRunning=True),
    )
    assert messages(context, "client_run_terminals") == [
        'client panel of Parent/p shows run r as completed (reason "no-progress", '
        "childStillRunning true), where the last terminal frame it received "
        '(finished, at 00:00:00.003) makes it completed (summary "late", error null, reason '
        "null, childStillRunning null)"
    ]


def test_a_reducer_that_ignores_a_terminal_after_a_terminal_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interrupted run repaired by a later finished (§4.12) would stay interrupted."""
    context = frames_context(
        started("r"),
        terminal("r", "interrupted", 1, error="x", reason="budget-exceeded"),
        terminal("r", "finished", 2, summary="late"),
    )
    patched_view(
        monkeypatch,
        lambda view: view["runs"]["r"].update(
            status="interrupted", summary=None, error="x", reason="budget-exceeded"
        ),
    )
    assert messages(context, "client_run_terminals") == [
        'client panel of Parent/p shows run r as interrupted (summary null, error "x", reason '
        '"budget-exceeded"), where the last terminal frame it received (finished, at '
        '00:00:00.003) makes it completed (summary "late", error null, reason null, '
        "childStillRunning null)"
    ]


@pytest.mark.parametrize(
    ("run", "change", "sentence"),
    [
        (
            "r",
            {"status": "running"},
            "shows run r as running, where the last terminal frame it received (aborted, at "
            '00:00:00.002) makes it aborted (error "stop", reason null, childStillRunning null)',
        ),
        (
            "s",
            {"error": None},
            "shows run s as interrupted (error null), where the last terminal frame it "
            'received (interrupted, at 00:00:00.004) makes it interrupted (error "torn down", '
            'reason "window-exceeded", childStillRunning false)',
        ),
        (
            "u",
            {"status": "completed"},
            "shows run u as completed, where no terminal frame it received makes it other than "
            "running",
        ),
    ],
)
def test_wrong_terminal_fields_are_caught(
    run: str, change: dict, sentence: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = frames_context(
        started("r"),
        terminal("r", "aborted", 1, reason="stop"),
        started("s"),
        terminal(
            "s",
            "interrupted",
            1,
            error="torn down",
            reason="window-exceeded",
            childStillRunning=False,
        ),
        started("u"),
    )
    patched_view(monkeypatch, lambda view: view["runs"][run].update(change))
    assert messages(context, "client_run_terminals") == [f"client panel of {P} {sentence}"]


def test_the_terminal_checker_is_not_blind(
    budgets: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    patched_view(monkeypatch, lambda view: [run.update(error="?") for run in view["runs"].values()])
    fails_with_a_blind_checker(
        monkeypatch, "client_run_terminals", finds("client_run_terminals"), budgets
    )


# -- progress_flushed (S4) -----------------------------------------------------------------------
BURST = """
    name: burst
    description: a Think-like child reports a burst of progress while a browser watches its parent
    seed: 7
    agents:
      parent:
        workload: tools
        host: think
        runs:
          - {run_id: report, child: think, input: "summarize the findings"}
    clients:
      browser: {agent: parent}
    model:
      rules:
        - after_tool: work
          reply: {text: "Summarized.", chunks: 2, delay: 100ms}
        - asked: summarize
          offers: work
          reply:
            tool_calls:
              - name: work
                input:
                  steps:
                    - progress: {fraction: 0.2}
                    - progress: {fraction: 0.3}
                    - progress: {fraction: 0.4}
                    - sleep: 1000
                    - progress: {fraction: 0.8}
                    - sleep: 1000
                    - progress: {fraction: 1.0}
      default: {text: "Noted.", chunks: 2, delay: 100ms}
    steps:
      - connect: {client: browser}
      - call: {agent: parent, method: dispatch, args: [report]}
      - run_until: 5m
"""
PARENT = "ThinkToolsWorkload/parent"
CHILD = f"{PARENT}/ThinkToolChild/report"


@pytest.fixture(scope="module")
def burst() -> CheckContext:
    return scenario_context(BURST)


def progress_frame(record_: TraceRecord, fraction: float) -> bool:
    frame = record_.get("frame")
    if record_.event != "connection:frame" or not isinstance(frame, dict):
        return False
    body = json.loads(frame.get("event", {}).get("body") or "null")
    return isinstance(body, dict) and body.get("data", {}).get("fraction") == fraction


def last_of_batch(context: CheckContext) -> TraceRecord:
    return context.events("workload:reported", CHILD, outcome="coalesced")[-1]


def test_the_latest_value_of_a_burst_is_flushed(burst: CheckContext) -> None:
    """0.3 and 0.4 come within 200 ms of 0.2 and are coalesced; 0.4, the latest, is sent when
    the window ends."""
    reports = burst.events("workload:reported", CHILD)
    assert [(r.get("fraction"), r.get("outcome")) for r in reports] == [
        (0.2, "emitted"),
        (0.3, "coalesced"),
        (0.4, "coalesced"),
        (0.8, "emitted"),
        (1.0, "emitted"),
    ]
    (flush,) = [r for r in burst.records if progress_frame(r, 0.4)]
    assert flush.t_ms == last_of_batch(burst).t_ms + 200
    assert not [r for r in burst.records if progress_frame(r, 0.3)]
    assert messages(burst, "progress_flushed") == []


@pytest.fixture(scope="module")
def unflushed(burst: CheckContext) -> CheckContext:
    """The burst as a runtime that drops a coalesced value (the SDK's D17) would leave it."""
    return without(burst, lambda r: progress_frame(r, 0.4))


def test_a_dropped_coalesced_value_is_caught(
    unflushed: CheckContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert messages(unflushed, "progress_flushed") == [
        f"run report of {CHILD} reported progress 0.4 at 00:00:00.177 and it was coalesced, but "
        f"connection {connection(unflushed)} of {PARENT} received a later chunk of the run at "
        "00:00:01.177 with no progress 0.4 before it: the latest value of a batch is sent when "
        "its 200 ms window ends, by 00:00:00.377"
    ]
    fails_with_a_blind_checker(
        monkeypatch, "progress_flushed", finds("progress_flushed"), unflushed
    )


def connection(context: CheckContext) -> str:
    return str(context.events("connection:open", PARENT)[0].get("connection"))


@pytest.mark.parametrize(
    ("why", "event", "agent", "fields"),
    [
        (
            "a done report in the window wins over the batch",
            "workload:reported",
            CHILD,
            {"kind": "progress", "outcome": "emitted", "fraction": 1.0},
        ),
        ("the child died in the window", "incarnation:end", CHILD, {"reason": "crash"}),
        ("the parent died in the window", "incarnation:end", PARENT, {"reason": "deploy"}),
        ("the client left in the window", "connection:close", PARENT, {}),
    ],
)
def test_a_flush_is_not_owed_when(
    unflushed: CheckContext, why: str, event: str, agent: str, fields: dict[str, Any]
) -> None:
    report = last_of_batch(unflushed)
    if event == "connection:close":
        fields = {"connection": connection(unflushed)}
    context = with_record(
        unflushed, report.seq, report, event=event, agent=agent, t_ms=report.t_ms + 100, **fields
    )
    assert messages(context, "progress_flushed") == [], why


def test_a_flush_is_not_owed_for_a_run_that_ended_in_the_window(unflushed: CheckContext) -> None:
    context = with_row(
        unflushed,
        CHILD,
        "cf_agent_tool_child_runs",
        {"run_id": "report"},
        completed_at=last_of_batch(unflushed).t_ms + 150,
    )
    assert messages(context, "progress_flushed") == []


def test_a_run_cut_before_its_window_ended_owes_nothing(unflushed: CheckContext) -> None:
    """No liveness phase, and the run stopped before anything came after the window."""
    due = last_of_batch(unflushed).t_ms + 200
    cut = dataclasses.replace(
        unflushed, records=[r for r in unflushed.records if r.t_ms <= due], quiet=None, end_ms=due
    )
    assert not cut.liveness_ran
    assert messages(cut, "progress_flushed") == []


def test_only_the_latest_value_of_a_batch_is_owed(unflushed: CheckContext) -> None:
    """A later report in the window makes the batch's latest that one, not 0.4."""
    report = last_of_batch(unflushed)
    context = with_record(unflushed, report.seq, report, t_ms=report.t_ms + 100, fraction=0.5)
    (message,) = messages(context, "progress_flushed")
    assert message.startswith(f"run report of {CHILD} reported progress 0.5 at 00:00:00.277")


# -- milestones_before_finish (S3) ---------------------------------------------------------------
HOST = "Host/h"
KV_PUT = f"INSERT INTO {KV_TABLE} (key, value) VALUES (?, ?)"


def milestone_context(
    answers: list[tuple[str, int]],
    finished_at: int | None = 120_000,
    deaths: tuple[int, ...] = (),
    quiet: bool | None = True,
    end_ms: int = 3_600_000,
    transcript: bool = True,
) -> CheckContext:
    """A chat host whose detached run r1 asks to announce `halfway`, which its child reached at
    60 s; the dedupe entry's committed writes `(state, at)`, the finish delivered at
    `finished_at`, the host's deaths."""
    key = milestone_dedupe_key("r1", "halfway")
    row = {
        "run_id": "r1",
        "agent_type": "Child",
        "detached": 1,
        "status": "completed",
        "detached_on_milestones": json.dumps({"names": ["halfway"], "mode": "narrate"}),
    }
    host: dict[str, list[dict[str, Any]]] = {"cf_agent_tool_runs": [row]}
    if transcript:
        host["cf_ai_chat_agent_messages"] = []
    child = {
        "cf_agent_tool_milestones": [
            {"run_id": "r1", "sequence": 0, "name": "halfway", "at": 60_000}
        ]
    }
    events: list[tuple[int, str, dict[str, Any]]] = [
        (at, "hook:milestone_delivered", {"runId": "r1", "name": "halfway"})
        for state, at in answers
        if state == "delivered"
    ]
    if finished_at is not None:
        events.append(
            (
                finished_at,
                "hook:delivered",
                {"runId": "r1", "slot": "finish", "status": "completed"},
            )
        )
    events += [(t, "incarnation:end", {"reason": "crash"}) for t in deaths]
    if quiet is not None:
        events.append((end_ms, "quiesce:end", {"quiet": quiet}))
    records = [
        record(0, t, HOST if e != "quiesce:end" else "", 1, e, **f)
        for t, e, f in sorted(events, key=lambda x: x[0])
    ]
    return CheckContext(
        records=renumbered(records),
        storage={HOST: host, f"{HOST}/Child/r1": child},
        alarms={HOST: None},
        journals={
            HOST: tuple(((KV_PUT, (key, json.dumps({"state": s, "at": at}))),) for s, at in answers)
        },
        journal_ms={HOST: tuple(at for _, at in answers)},
        end_ms=end_ms,
    )


def test_a_milestone_announced_before_the_finish_passes() -> None:
    context = milestone_context([("claimed", 60_000), ("delivered", 60_000)])
    assert messages(context, "milestones_before_finish") == []


def test_a_failed_announcement_is_an_answer() -> None:
    """A hook that threw is not retried (S3): the milestone was answered."""
    context = milestone_context([("claimed", 60_000), ("failed", 61_000)])
    assert messages(context, "milestones_before_finish") == []


def test_a_milestone_announced_after_the_finish_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    context = milestone_context([("claimed", 130_000), ("delivered", 130_000)])
    assert messages(context, "milestones_before_finish") == [
        "milestone halfway of run r1 of Host/h, reached at 00:01:00.000, was announced only at "
        "00:02:10.000, after the run's finish was delivered at 00:02:00.000: a milestone is "
        "announced before its run finishes"
    ]
    fails_with_a_blind_checker(
        monkeypatch, "milestones_before_finish", finds("milestones_before_finish"), context
    )


def test_a_milestone_never_announced_is_caught() -> None:
    assert messages(milestone_context([]), "milestones_before_finish") == [
        "milestone halfway of run r1 of Host/h, reached at 00:01:00.000, was never announced, "
        "though the run's finish was delivered at 00:02:00.000: a milestone is announced before "
        "its run finishes"
    ]
    assert messages(milestone_context([], finished_at=None), "milestones_before_finish") == [
        "milestone halfway of run r1 of Host/h, reached at 00:01:00.000, was never announced by "
        "the end (01:00:00.000, quiet)"
    ]


@pytest.mark.parametrize(
    ("why", "context"),
    [
        ("no liveness phase", milestone_context([], finished_at=None, quiet=None)),
        (
            "not quiet, and less than the grace since it was reached",
            milestone_context([], finished_at=None, quiet=False, end_ms=300_000),
        ),
        (
            "a claim cut by the host's death holds the milestone for its lease",
            milestone_context(
                [("claimed", 100_000), ("claimed", 170_000), ("delivered", 170_000)],
                deaths=(110_000,),
            ),
        ),
        ("a plain Agent has no hook to announce with", milestone_context([], transcript=False)),
    ],
)
def test_a_late_milestone_is_forgiven_when(why: str, context: CheckContext) -> None:
    assert messages(context, "milestones_before_finish") == [], why


def test_a_claim_held_with_no_death_is_not_forgiven() -> None:
    context = milestone_context([("claimed", 100_000), ("delivered", 170_000)])
    (message,) = messages(context, "milestones_before_finish")
    assert "was announced only at 00:02:50.000" in message


def test_a_finish_whose_turn_may_have_rolled_back_is_not_the_run_s_end() -> None:
    """The output gate: a crash in the instant of the finish's delivery may have undone it."""
    answers = [("claimed", 130_000), ("delivered", 130_000)]
    assert messages(milestone_context(answers, deaths=(120_000,)), "milestones_before_finish") == []
    assert messages(milestone_context(answers, deaths=(119_000,)), "milestones_before_finish")


def test_a_later_interrupted_frame_under_the_same_number_is_applied() -> None:
    """generate found the model taking a re-attach's live `no-progress` frame for a repeat of
    the replayed `inspect-failed` one (same run and sequence, same kind): S5 keeps a genuine
    frame, and the reducer shows the later one; so must the model."""
    context = frames_context(
        started("r3"),
        terminal("r3", "interrupted", 1, error="could not inspect", reason="inspect-failed"),
        terminal(
            "r3", "interrupted", 1, error="gave up", reason="no-progress", childStillRunning=True
        ),
    )
    assert messages(context, "client_run_terminals") == []
