"""The `tools` area: a `tools` workload whose runs are agent tools on sub-agents.

Awaited and detached runs of scripted, Think-like and AIChatAgent-like children, under a plain
or a chat host parent; detached runs with drawn budgets (`max_budget`, `no_progress_budget`),
a flaky or slow `on_finish`, `notify` and narrated milestones on a chat host; children that
report progress, milestones, text and streams of UI message chunks of every kind (text,
reasoning, tool calls and their outcomes, data parts by id and their updates, step boundaries,
sources), sleep, finish with an error, hang until a budget gives up on them, or stay silent
after a restart (`resume: false`), and carry a brief in their input
that puts its JSON at the preview's limit exactly or beside it; a cap on concurrent runs.
Runs are dispatched, dispatched again under the same run id (a re-issue) and cancelled, at
times drawn to land on a child's sleep or a budget exactly, a millisecond either side, or
anywhere.
"""

from __future__ import annotations

import json
from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.parts import Part, TimedStep, Use, call
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.emit import format_duration

__all__ = ["tools_part"]

CHILDREN = ("scripted", "scripted", "scripted", "think", "chat")
RUN_IDS = (
    ("r1", "r2", "r3"),
    ("Beta", "alpha", "Gamma"),
    ("job-2", "job_1", "Job3"),
    ("task-1", "task-10", "task-2"),
)
"""Run ids a parent may give its runs: plain, mixed in case and punctuation as a user's are (so
that a client lists runs of one order by `localeCompare` of ids that code points sort
otherwise), or numbered past nine, one id the start of another."""
HOSTS = ("agent", "agent", "think", "chat")
DETACHED_MAX_BUDGET_MS = 86_400_000
"""The SDK's default absolute budget of a detached run (`detachedMaxBudgetMs`, 24 h)."""
INPUTS = (
    "research fibers",
    "research fibers",
    "r" * 499 + "\U0001f642 then more",
    "r" * 498 + "\U0001f642",
    "r" * 501,
    "\u00e9" * 600,
)
"""A chat child's user message: short, or long enough that its preview is cut (agent-tools §2.3)
right where an emoji's two UTF-16 halves meet, right after one, one past the limit, or well
past it in accented letters."""


TOOL_INPUT = '{"q":"fibers","limit":3}'
"""The raw JSON text a drawn tool call streams as its input, cut where the draw says."""


def _stream(st: Any, draw: Any) -> tuple[list[dict[str, Any]], str]:
    """One block of UI message chunks as a model's stream has them (a text or reasoning part,
    a tool call and its outcome, a data part, a step boundary, a source or file), and its kind.
    Ids are drawn from a few, so that a later block may extend or replace an earlier part."""
    kind = draw(st.sampled_from(("text", "reasoning", "tool", "data", "step", "source")))
    chunks: list[dict[str, Any]] = []
    if kind in ("text", "reasoning"):
        ident = draw(st.sampled_from(("t1", "t2")))
        chunks.append({"type": f"{kind}-start", "id": ident})
        for piece in draw(
            st.lists(st.sampled_from(("Read", "ing ", "the ", "spec.")), min_size=1, max_size=3)
        ):
            chunks.append({"type": f"{kind}-delta", "id": ident, "delta": piece})
        if draw(st.booleans()):
            chunks.append({"type": f"{kind}-end", "id": ident})
    elif kind == "tool":
        call_id = draw(st.sampled_from(("call-1", "call-2")))
        name = draw(st.sampled_from(("lookup", "fetch")))
        chunks.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": name})
        cut = draw(st.integers(1, len(TOOL_INPUT) - 1))
        for piece in (TOOL_INPUT[:cut], TOOL_INPUT[cut:]):
            chunks.append(
                {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": piece}
            )
        end = draw(st.sampled_from(("available", "output", "error", "streaming")))
        if end != "streaming":
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": {"q": "fibers", "limit": 3},
                }
            )
        if end == "output":
            chunks.append(
                {"type": "tool-output-available", "toolCallId": call_id, "output": [1, 2]}
            )
        elif end == "error":
            chunks.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": "no"})
    elif kind == "data":
        # A part and its updates: later chunks of one id replace the part of their type and
        # id, and one of the other type under the same id is a part of its own.
        ident = draw(st.sampled_from(("d1", "d2"))) if draw(st.booleans()) else None
        for _ in range(draw(st.integers(1, 3))):
            chunk: dict[str, Any] = {"type": draw(st.sampled_from(("data-status", "data-sources")))}
            if ident is not None:
                chunk["id"] = ident
            chunk["data"] = {"n": draw(st.integers(0, 2))}
            if not draw(st.integers(0, 3)):
                chunk["transient"] = True
            chunks.append(chunk)
    elif kind == "step":
        chunks.append({"type": draw(st.sampled_from(("start-step", "finish-step")))})
    elif draw(st.booleans()):
        chunks.append({"type": "source-url", "sourceId": "s1", "url": "https://example.com/a"})
    else:
        chunks.append(
            {"type": "file", "url": "https://example.com/f.png", "mediaType": "image/png"}
        )
    return chunks, kind


BRIEFS = ("summarize the spec", "b" * 480)
"""A scripted run's brief when its steps make the input's length hard to aim: short, or long
enough that steps push it past the preview's limit."""


def _brief(st: Any, draw: Any, run: dict[str, Any]) -> str:
    """A brief for a scripted run's input. For a run without steps, whose input's JSON is
    `{"steps":[],"resume":...,"brief":...}`, one that makes that JSON a character short of the
    preview's 500-character limit (agent-tools §2.3), exactly at it, or one past it, in plain
    letters or ending in an emoji's two UTF-16 halves."""
    if "steps" in run:
        return str(draw(st.sampled_from(BRIEFS)))
    target = draw(st.sampled_from((499, 500, 501)))
    room = target - _input_length({**run, "brief": ""})
    if draw(st.booleans()):
        return "b" * (room - 2) + "\U0001f642"
    return "b" * room


def _input_length(run: dict[str, Any]) -> int:
    """The length in UTF-16 units of a step-less scripted run's input as JSON.stringify writes
    it (no spaces; this is only asked of inputs without numbers)."""
    value = {"steps": [], "resume": run.get("resume", True), "brief": run.get("brief", "")}
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-16-le")) // 2


def _script(st: Any, draw: Any, hang: bool) -> tuple[list[dict[str, Any]], int, list[str]]:
    """A scripted child's steps, their total sleep and the kinds used."""
    steps: list[dict[str, Any]] = []
    total, kinds = 0, []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(("sleep", "sleep", "progress", "milestone", "text", "chunks")))
        if kind == "chunks":
            chunks, block = _stream(st, draw)
            steps += [{"chunk": chunk} for chunk in chunks]
            kinds.append(f"chunks: {block}")
            continue
        kinds.append(kind)
        if kind == "sleep":
            ms = draw(aligned(st, [1000, 60_000], 1000, 600_000))
            total += ms
            steps.append({"sleep": format_duration(ms)})
        elif kind == "progress":
            steps.append({"progress": {"fraction": draw(st.sampled_from((0.0, 0.25, 0.5, 1.0)))}})
        elif kind == "milestone":
            steps.append({"milestone": draw(st.sampled_from(("halfway", "sources")))})
        else:
            steps.append({"text": "some words"})
    if hang:
        steps.append({"hang": True})
        kinds.append("hang")
    elif steps or draw(st.booleans()):
        status = draw(st.sampled_from(("completed", "completed", "error")))
        steps.append({"finish": status})
        kinds.append(f"finish {status}")
    return steps, total, kinds


def _run(
    st: Any, draw: Any, run_id: str, alias: str, host: str, surface: Surface
) -> tuple[dict[str, Any], list[Use], int, list[int]]:
    child = draw(st.sampled_from(surface.narrow(CHILDREN, "tool_children")))
    run: dict[str, Any] = {"run_id": run_id}
    uses: list[Use] = []
    detached = draw(st.booleans())
    api = "run_agent_tool"
    uses.append(Use(api, "detached" if detached else "awaited", alias, "hook:on_agent_tool_finish"))
    if child != "scripted":
        run["child"] = child
        uses.append(Use(api, f"{child} child", alias, "hook:on_agent_tool_finish"))
    options: dict[str, Any] = {}
    budget = None
    if detached:
        if surface.opens("tools", "max_budget") and draw(st.booleans()):
            budget = draw(aligned(st, [1000, 60_000], 1000, 900_000))
            options["max_budget"] = format_duration(budget)
            uses.append(Use(api, "detached.max_budget", alias, "hook:on_agent_tool_finish"))
        if surface.opens("tools", "no_progress_budget") and draw(st.booleans()):
            options["no_progress_budget"] = format_duration(
                draw(aligned(st, [1000, 60_000], 1000, 600_000))
            )
            uses.append(Use(api, "detached.no_progress_budget", alias, "hook:on_agent_tool_finish"))
        if host != "agent" and draw(st.integers(0, 2)) == 0:
            options["notify"] = True
            uses.append(Use(api, "detached.notify", alias, "hook:on_agent_tool_finish"))
        elif draw(st.booleans()):
            if draw(st.booleans()):
                options["on_finish_work"] = format_duration(draw(aligned(st, [60_000], 0, 120_000)))
                uses.append(Use("on_finish", "works", alias, "workload:on_finish"))
            if surface.opens("tools", "on_finish_fails") and draw(st.booleans()):
                options["on_finish_fails"] = draw(st.integers(1, 2))
                uses.append(Use("on_finish", "raises", alias, "workload:on_finish_failed"))
        if host != "agent" and draw(st.integers(0, 2)) == 0:
            options["on_milestones"] = ["halfway"]
            uses.append(Use(api, "detached.on_milestones", alias, "hook:milestone_delivered"))
    run["detached"] = options or detached
    total = 0
    if child == "scripted":
        hang = budget is not None and draw(st.integers(0, 3)) == 0
        steps, total, kinds = _script(st, draw, hang)
        if steps:
            run["steps"] = steps
        uses += [Use("child", kind, alias, "hook:on_agent_tool_finish") for kind in kinds]
        if not draw(st.integers(0, 3)):
            run["resume"] = False
            uses.append(Use("child", "resume: false", alias, "agent_tool:recovery:row"))
        if surface.opens("tools", "brief") and not draw(st.integers(0, 2)):
            run["brief"] = _brief(st, draw, run)
            if "steps" not in run and _input_length(run) >= 499:
                uses.append(Use(api, "input at the preview's limit", alias, "connection:frame"))
    else:
        run["input"] = draw(st.sampled_from(INPUTS))
        if len(run["input"]) > 100:
            uses.append(Use(api, "input at the preview's limit", alias, "connection:frame"))
    periods = [p for p in (total, budget, 60_000, 1000) if p]
    return run, uses, max(total, budget or 0), periods


def tools_part(st: Any, alias: str, surface: Surface = FULL) -> Any:
    """A strategy of `Part`: one `tools` parent named `alias`, with its runs (the hosts and
    children `surface` keeps open)."""

    @st.composite
    def part(draw: Any) -> Part:
        host = draw(st.sampled_from(surface.narrow(HOSTS, "tool_hosts")))
        count = draw(st.integers(1, 3))
        runs, uses, horizon, periods = [], [], 0, []
        names = RUN_IDS[0]
        if surface.opens("tools", "run_ids"):
            names = draw(st.sampled_from(RUN_IDS))
            if names != RUN_IDS[0]:
                uses.append(Use("run_agent_tool", "run ids of mixed case", alias, "rpc"))
        for index in range(count):
            run, used, busy, times = _run(st, draw, names[index], alias, host, surface)
            runs.append(run)
            uses += used
            horizon = max(horizon, busy)
            periods += times
        agent: dict[str, Any] = {"workload": "tools"}
        if host != "agent":
            agent["host"] = host
            uses.append(Use("tools parent", f"{host} host", alias, "hook:on_agent_tool_finish"))
        start = draw(st.sampled_from(("call", "call", "on_start")))
        if start == "on_start":
            agent["start"] = "on_start"
        if draw(st.integers(0, 3)) == 0:
            agent["options"] = {"max_concurrent_agent_tools": draw(st.integers(0, 2))}
            uses.append(Use("run_agent_tool", "max_concurrent_agent_tools", alias, "rpc"))
        agent["runs"] = runs
        ids = [run["run_id"] for run in runs]
        # With `start: on_start`, the first call wakes the parent, whose startup dispatches
        # every run; a `dispatch` of one of them then is the re-issue a client would send.
        steps = [call(0, alias, "dispatch", *([ids[0]] if start == "on_start" else []))]
        window = max(horizon, 1000)
        for run_id in draw(st.lists(st.sampled_from(ids), max_size=2)):
            steps.append(call(draw(aligned(st, periods, 0, window)), alias, "dispatch", run_id))
            uses.append(Use("run_agent_tool", "re-issued run id", alias, "rpc"))
        if surface.opens("tools", "clear") and draw(st.integers(0, 3)) == 0:
            at = draw(aligned(st, periods, 0, window))
            status = draw(st.sampled_from((None, "completed", "error", "aborted")))
            steps.append(call(at, alias, "clear", *([status] if status else [])))
            uses.append(Use("clear_agent_tool_runs", status or "every status", alias, "rpc"))
            again = draw(st.lists(st.sampled_from(ids), max_size=1))
            for run_id in again:
                later = at + draw(aligned(st, periods, 0, window))
                steps.append(call(later, alias, "dispatch", run_id))
                uses.append(Use("run_agent_tool", "run id again after a clear", alias, "rpc"))
        for run_id in draw(st.lists(st.sampled_from(ids), max_size=2)):
            steps.append(call(draw(aligned(st, periods, 0, window)), alias, "cancel", run_id))
            uses.append(Use("cancel_agent_tool", "by a call", alias, "hook:on_agent_tool_finish"))
        clients: dict[str, str] = {}
        if surface.opens("tools", "client") and draw(st.booleans()):
            # A browser on the parent reduces the runs' frames (the sibling lists, terminal
            # fields, progress and milestones), across a reconnect now and then.
            name = f"{alias}-browser"
            clients[name] = alias
            steps.append(
                TimedStep(draw(aligned(st, periods, 0, window)), "connect", {"client": name})
            )
            uses.append(Use("client", "connect to a tools parent", alias, "connection:open"))
            if draw(st.booleans()):
                at = draw(aligned(st, periods, 0, window))
                steps.append(TimedStep(at, "reconnect", {"client": name}))
                uses.append(Use("client", "reconnect to a tools parent", alias, "connection:close"))
        settles = DETACHED_MAX_BUDGET_MS if any(_may_stall(run) for run in runs) else 0
        return Part({alias: agent}, tuple(steps), clients, tuple(uses), horizon, settles)

    return part()


def _may_stall(run: dict[str, Any]) -> bool:
    """A detached run whose scripted child stays silent after a restart (`resume: false`), with
    no drawn `max_budget`: if a fault kills the child, the run has never signalled, so only the
    absolute budget's default ceiling ends it (agent-tools §4.6)."""
    detached = run.get("detached")
    if not detached or run.get("resume", True):
        return False
    return not (isinstance(detached, dict) and "max_budget" in detached)
