"""Records built by hand and runs made by the real runner, for the report tests."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from reports import RunReport
from scenarios.language.loader import load_scenario
from scenarios.run.runner import run_scenario

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"


def rec(seq: int, t: int, agent: str, inc: int, event: str, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "t": t, "agent": agent, "inc": inc, "event": event, **fields}


def frame(run_id: str, kind: str, sequence: int, **event: Any) -> dict[str, Any]:
    return {
        "type": "agent-tool-event",
        "parentToolCallId": "tc",
        "sequence": sequence,
        "event": {"kind": kind, "runId": run_id, **event},
    }


P, CHILD = "Parent/p", "Parent/p/ScriptedChild/r1"


def story() -> list[dict[str, Any]]:
    """A parent with a fiber, a detached run in a child facet, a failing then retried alarm, a
    storage fault, a deploy, a recovered fiber, a give-up then a real completion, an alarm handler
    killed at the 15-minute limit, and a quiesce."""
    rows: list[tuple[int, str, int, str, dict[str, Any]]] = [
        (0, "", 0, "simulation:start", {"seed": 42}),
        (0, P, 1, "incarnation:start", {"trigger": "get"}),
        (0, P, 1, "fiber:run:started", {"fiberName": "ingest", "fiberId": "f1", "managed": False}),
        (0, P, 1, "alarm:set", {"at": 5000}),
        (0, P, 1, "connection:open", {"connection": "c1", "client": "client-1"}),
        (0, CHILD, 1, "incarnation:start", {"trigger": "facet"}),
        (
            0,
            P,
            1,
            "connection:frame",
            {"connection": "c1", "frame": frame("r1", "started", 0, agentType="ScriptedChild")},
        ),
        (5000, P, 1, "alarm:fired", {"attempt": 0}),
        (5000, P, 1, "alarm:failed", {"attempt": 0, "error": "RuntimeError: boom"}),
        (5000, P, 1, "alarm:retry", {"attempt": 1, "at": 7000}),
        (7000, P, 1, "alarm:fired", {"attempt": 1}),
        (7000, P, 1, "alarm:done", {"attempt": 1}),
        (10000, P, 1, "fault:storage_error", {"statement": "UPDATE cf_agents_fibers SET x = ?"}),
        (70000, "", 0, "platform:deploy", {"cause": "scripted"}),
        (70000, CHILD, 1, "incarnation:end", {"reason": "deploy"}),
        (
            70000,
            P,
            1,
            "connection:close",
            {"connection": "c1", "code": 1006, "reason": "evicted: deploy", "by": "platform"},
        ),
        (70000, P, 1, "incarnation:end", {"reason": "deploy"}),
        (100000, P, 2, "incarnation:start", {"trigger": "alarm"}),
        (
            100000,
            P,
            2,
            "fiber:recovery:detected",
            {"fiberName": "ingest", "fiberId": "f1", "managed": False, "elapsedMs": 100000},
        ),
        (
            100000,
            P,
            2,
            "fiber:run:interrupted",
            {"fiberName": "ingest", "fiberId": "f1", "managed": False, "elapsedMs": 100000},
        ),
        (
            100000,
            P,
            2,
            "fiber:recovery:handled",
            {"fiberName": "ingest", "fiberId": "f1", "managed": False, "status": "user"},
        ),
        (
            100000,
            P,
            2,
            "hook:on_agent_tool_finish",
            {"runId": "r1", "slot": "give_up", "status": "interrupted"},
        ),
        (
            100000,
            P,
            2,
            "hook:delivered",
            {"runId": "r1", "slot": "give_up", "status": "interrupted"},
        ),
        (100000, "", 0, "quiesce:begin", {"limit_ms": 3_600_000}),
        (100000, P, 2, "alarm:fired", {"attempt": 0}),
        (1_000_000, P, 2, "alarm:killed", {"attempt": 0, "limit_ms": 900_000}),
        (1_000_000, P, 2, "incarnation:end", {"reason": "alarm-limit"}),
        (1_200_000, P, 3, "incarnation:start", {"trigger": "rpc"}),
        (
            1_200_000,
            P,
            3,
            "hook:on_agent_tool_finish",
            {"runId": "r1", "slot": "finish", "status": "completed"},
        ),
        (
            1_200_000,
            P,
            3,
            "hook:delivered",
            {"runId": "r1", "slot": "finish", "status": "completed"},
        ),
        (1_300_000, P, 3, "console:error", {"message": "on_finish said: done"}),
        (1_400_000, P, 3, "incarnation:end", {"reason": "idle"}),
        (1_500_000, "", 0, "quiesce:end", {"quiet": True}),
    ]
    return [
        rec(seq, t, agent, inc, event, **fields)
        for seq, (t, agent, inc, event, fields) in enumerate(rows)
    ]


def report_of(records: list[dict[str, Any]], passed: bool = True, **overrides: Any) -> RunReport:
    values: dict[str, Any] = {
        "name": "story",
        "path": "scenarios/library/story.yaml",
        "seed": 42,
        "passed": passed,
        "failures": [] if passed else ["exactly_once_finish: run r1 was delivered twice"],
        "replay_command": "agentsim run scenarios/library/story.yaml --seed 42",
        "records": records,
    }
    values.update(overrides)
    return RunReport.from_records(**values)


def library_run(name: str, seed: int | None = None) -> RunReport:
    """A real run of a library scenario, as the CLI would hand it to reports."""
    scenario = load_scenario(str(LIBRARY / f"{name}.yaml"))
    result = run_scenario(scenario, seed)
    return RunReport.from_records(
        name=result.name,
        path=result.path,
        seed=result.seed,
        passed=result.passed,
        failures=list(result.failures),
        replay_command=result.replay,
        records=[record.to_dict() for record in result.trace],
        digest=result.digest,
    )


def library_names() -> list[str]:
    return sorted(path.stem for path in LIBRARY.glob("*.yaml"))


class Elements(HTMLParser):
    """Every start tag of a page with its attributes, in order."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))

    def with_class(self, tag: str, name: str) -> list[dict[str, str]]:
        return [a for t, a in self.found if t == tag and name in a.get("class", "").split()]
