"""`docs/events.md`, generated from the code: every trace record's event name, its fields, and
when it is written.

Names and fields are read from the source, not typed twice: `emit_sites` parses the runtime,
the platform and the workloads (`EMITTING_PACKAGES`) and finds every call that writes a record
with a literal event name (`self._emit("fiber:run:started", fiberId=...)`,
`platform_event(record, "alarm:set", at=...)`, `trace.emit(...)`, `record(path, inc, "x",
{...})`), with its keyword fields and the function it sits in. What the code cannot say,
*when* the record is written, is the one sentence per name in `WHEN`; the few names built at run
time (`fault:<kind>`, `console:<level>`, a delivery's `rpc` / `run_in` / `request` and their
`:error`) are declared in `FAMILIES` with their fields. `tests/unit/test_events_doc.py`
keeps the three in step: a name emitted without a sentence, a sentence for a name nothing
emits, a record in a golden trace that no entry covers, or a `docs/events.md` that differs
from `render()` each fail it. Regenerate with `python -m scenarios.run.events_doc`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DOC_PATH",
    "EMITTING_PACKAGES",
    "FAMILIES",
    "WHEN",
    "EmitSite",
    "Family",
    "emit_sites",
    "family_of",
    "render",
]

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "events.md"
EMITTING_PACKAGES = ("agents_core", "sim", "scenarios/workloads", "scenarios/library_agents")
"""Where trace records are written from (the checkers and the harness only read them)."""
_EMITTERS = {"emit": 0, "_emit": 0, "platform_event": 1, "record": 2}
"""Calls that write a record, and the position of the event name among their arguments."""
# Bare names too: the SDK's lifecycle events `connect` / `disconnect` have no colon.
_EVENT_NAME = re.compile(r"[a-z_]+(:[a-z_]+)*")


@dataclass
class EmitSite:
    """Everything the source says about one event name."""

    fields: set[str] = field(default_factory=set)
    """Keyword fields given where it is written (`**name` for fields splatted from a dict)."""
    writers: set[str] = field(default_factory=set)
    """`module.function` of every call that writes it (the document shows the modules: a
    function moving within its module is no change to the reader)."""


@dataclass(frozen=True)
class Family:
    """Event names built at run time: a pattern, its fields, and when it is written."""

    pattern: str
    """The name as `docs/events.md` shows it (`fault:<kind>`)."""
    regex: str
    fields: tuple[str, ...]
    when: str
    writer: str


FAMILIES = (
    Family(
        "rpc",
        r"rpc",
        ("method",),
        "A plain RPC is delivered to the agent (its stub called a public method; the runtime's "
        "own `_cf_*` routing calls are not recorded).",
        "sim.stubs, sim.simulation",
    ),
    Family(
        "request",
        r"request",
        ("method", "path"),
        "An HTTP request is delivered to the agent (a startup trigger).",
        "sim.simulation",
    ),
    Family(
        "connection:message",
        r"connection:message",
        ("connection", "message"),
        "A client's WebSocket message is delivered to the agent.",
        "sim.platform",
    ),
    Family(
        "<delivery>:error",
        r"(rpc|run_in|request|connection:message):error",
        ("method / function / path / connection, message", "error"),
        "That delivery's handler raised (or its incarnation died under it while it was "
        "alive): the fields of the delivery's own record, and the error.",
        "sim.platform",
    ),
    Family(
        "fault:<kind>",
        r"fault:(storage_error|crash|crash_after_commit)",
        ("statement",),
        "A storage fault struck the statement (whitespace collapsed, cut at 200 characters): "
        "`fault:storage_error` it raised, `fault:crash` the process died just before it (its "
        "turn rolled back), `fault:crash_after_commit` the statement ran, its turn committed "
        "and the process died at that instant. Armed faults and the profile's random ones alike.",
        "sim.platform",
    ),
    Family(
        "console:<level>",
        r"console:(error|warn|info|log|debug)",
        ("message",),
        "The runtime wrote to its console, as the SDK's `console.warn` / `console.error` do "
        "(`console:warn`, `console:error`, `console:info`): a swallowed error, a warning.",
        "agents_core.agent",
    ),
    Family(
        "story:<kind>",
        r"story:[a-z_-]+",
        ("(the story's own)",),
        "A library agent (`scenarios.library_agents`) marks a beat of its story (a step, an "
        "attempt, a reply) so that scenarios can count and time it.",
        "scenarios.library_agents.story",
    ),
    Family(
        "run_in",
        r"run_in",
        ("function",),
        "`Simulation.run_in` (or a `run_in` step) runs a function against the live agent "
        "instance, delivered as a plain RPC is (no startup on a new incarnation).",
        "sim.simulation",
    ),
)
"""The names built at run time."""

WHEN: dict[str, str] = {
    # -- the simulation and the platform ---------------------------------------------------
    "simulation:start": "First record of every run: the seed it runs with.",
    "quiesce:begin": "The liveness phase starts: profile faults stop; its time limit.",
    "quiesce:end": "The liveness phase ends: whether nothing was left to happen.",
    "platform:deploy": "A deploy (scripted, or drawn by the fault profile) restarts every "
    "live incarnation; each then ends with reason deploy.",
    "incarnation:start": "A new incarnation of the agent starts, and what triggered it (get, "
    "rpc, request, connect, alarm, facet, lookup (a root looking a dead sub-agent up without "
    "starting it), ...).",
    "incarnation:end": "An incarnation dies: idle, deploy, alarm-limit, explicit, crash, "
    "destroyed, deleted or reset (the agent reset its own isolate, with `message` its reason, "
    "as 0.32.0 does after a memory-limit strike). Nothing of it runs after this record.",
    "startup:begin": "Startup (`on_start` under the input gate) begins, and its trigger.",
    "startup:done": "Startup finished; deliveries held by the input gate may run.",
    "startup:failed": "Startup raised; the incarnation's waiting deliveries fail with it.",
    "delivery:begin": "A delivery's handler starts (after the input gate and startup), and "
    "what kind of delivery it is.",
    "facet:deleted": "A sub-agent (facet) was deleted by its parent.",
    "storage:wiped": "The agent's storage was wiped (`destroy`).",
    "task:error": "A background task (`wait_until`) raised; the error is recorded, the "
    "incarnation lives on.",
    "upstream:error": "An upstream service (the model provider) failed a streamed call: which "
    "service, the chunk index, the error.",
    "fault:armed": "A scenario armed a storage fault on the agent: kind, match pattern, skip, "
    "count, and whether it waits for the sub-agent to be created.",
    "connection:open": "A client's WebSocket connection is accepted by the agent.",
    "connection:frame": "The agent sends a frame to a connection (what the client receives).",
    "connection:close": "A connection closes: by the client or the platform (an eviction), "
    "with code and reason.",
    "connect": "The SDK's `connect` event: a new connection has been sent its protocol frames; "
    "next come the agent-tool replay and `on_connect`.",
    "disconnect": "The SDK's `disconnect` event: a client's close is delivered (code, reason), "
    "just before `on_close`. A connection that dies with its incarnation has none.",
    # -- the alarm slot ----------------------------------------------------------------------
    "alarm:set": "The agent's alarm slot is set (replace-on-set) to a time; with `rolled_back`, "
    "a crash rolled back the turn that had changed it, and the slot holds again what it held "
    "before that turn.",
    "alarm:deleted": "The alarm slot is cleared, and the time it held; with `rolled_back`, a crash "
    "rolled back the turn that had armed it.",
    "alarm:fired": "The platform runs the alarm handler: attempt 0, then each retry.",
    "alarm:done": "The alarm handler returned.",
    "alarm:failed": "The alarm handler raised; a retry follows unless the attempts are spent.",
    "alarm:retry": "The platform schedules the next attempt (2 s, doubling).",
    "alarm:given_up": "After the last retry failed the platform gives the alarm up.",
    "alarm:killed": "The alarm handler ran past the 15-minute limit: the platform kills it "
    "with its incarnation.",
    "alarm:interrupted": "The incarnation running the alarm handler died (deploy, eviction, "
    "crash) before the handler ended.",
    "queue:create": "`queue` stored an item (a sub-agent announces its own).",
    "queue:retry": "A queued item's callback raised and is retried (its attempt, of at most "
    "maxAttempts).",
    "queue:error": "A queued item's callback failed for good (its attempts spent; on 0.32.0 "
    "attempts 0 when the root could not reach its sub-agent); the item is dropped.",
    "alarm:memory_limit_reset": "The runtime's alarm hit the memory limit again and again; "
    "it resets (or seals) the schedule table as the SDK does.",
    # -- keepAlive ---------------------------------------------------------------------------
    "keep_alive:acquire": "A keepAlive lease is taken (per-incarnation ordinal; holder "
    "`fiber:<id>` for a fiber, `keep_alive` otherwise).",
    "keep_alive:release": "That lease is let go.",
    # -- schedules ---------------------------------------------------------------------------
    "schedule:create": "`schedule` / `scheduleEvery` stored a schedule.",
    "schedule:cancel": "A schedule was cancelled (by the agent, or by a facet's cleanup).",
    "schedule:execute": "A due schedule's callback is about to run.",
    "schedule:retry": "The callback raised and is retried (attempt, of at most maxAttempts).",
    "schedule:error": "The callback failed for good (its attempts spent), or could not run.",
    "schedule:duplicate_warning": "Many one-shot schedules with the same callback are stale: "
    "the SDK's duplicate warning.",
    "job:backlog_warning": "Ten or more jobs of one owner are due in one alarm (0.32.0's job "
    "queue; it replaces the duplicate warning there).",
    "job:slow_dispatch": "A job's dispatch has run longer than its hung timeout (0.32.0); it "
    "is warned about once and runs on.",
    # -- Tasks (0.32.0: an agent's own runs, a top-level chat turn, a recovery continuation) -
    "task:accepted": "A Task run was accepted (its row written, its wake job pushed).",
    "task:attempt:started": "An attempt claimed the run (a new generation) and runs its handler.",
    "task:attempt:interrupted": "The run was still claimed by an attempt that is gone (its "
    "isolate died); a new attempt takes it over, from the step left running.",
    "task:step:started": "An attempt of a `step.do` starts its callback.",
    "task:step:retry": "A `step.do` whose earlier attempt failed below its retry limit runs "
    "again, once its retry time has come.",
    "task:step:completed": "That callback returned; its result is journaled.",
    "task:waiting": "A sleep or a step's retry ended the attempt: the run waits until `wakeAt`, "
    "when its wake job drives the next attempt.",
    "task:completed": "The run's handler returned (a run not retained is deleted).",
    "task:failed": "The run failed for good (its handler, or its definition missing).",
    "task:cancelled": "The run settled `cancelled`: `cancel` found it not running here, or its "
    "running attempt reached a step boundary (or its running step was aborted) after the "
    "request; `reason` as given.",
    "task:deleted": "`delete` removed a settled run and its steps.",
    # -- fibers and recovery -----------------------------------------------------------------
    "fiber:run:started": "`runFiber` starts a fiber (managed or not).",
    "fiber:run:completed": "The fiber's function returned; its row is deleted.",
    "fiber:run:failed": "The fiber's function raised.",
    "fiber:setup_failed": "A fiber's set-up threw before its function ran (its initial "
    "snapshot, its sub-agent registration or its keepAlive lease): it stops there; the harness's "
    "record, the SDK emits none.",
    "fiber:run:interrupted": "Recovery found a fiber whose incarnation died mid-run (written "
    "with `fiber:recovery:detected`).",
    "fiber:recovery:detected": "A recovery scan found an interrupted fiber row: its age.",
    "fiber:recovery:attempt": "The recovery hook (`on_fiber_recovered`) is called for it.",
    "fiber:recovery:handled": "The hook returned: the status it settled the fiber with.",
    "fiber:recovery:failed": "The hook raised (or recovery could not finish): the row is kept "
    "for a later scan, and why.",
    "fiber:recovery:skipped": "A row was left alone: past its maximum age, not yet due after "
    "a backoff, or cancelled.",
    "fiber:recovery:backoff": "A failed recovery's row waits: when it is due again.",
    "fiber:recovery:pass": "A recovery scan yielded at its time budget: rows done, scans so far.",
    # -- agent tools -------------------------------------------------------------------------
    "agent_tool:recovery:begin": "The parent's agent-tool recovery sweep starts at startup: "
    "runs to reconcile, its time budget.",
    "agent_tool:recovery:row": "The sweep finalized one run row: status and reason.",
    "agent_tool:recovery:reattach": "The sweep re-attaches to a child still running, within a "
    "budget.",
    "agent_tool:recovery:deadline": "The sweep ran out of its time budget at this run (the "
    "rest wait for the next pass).",
    "agent_tool:recovery:complete": "The sweep finished: how many runs, how long.",
    "agent_tool:recovery:failed": "The sweep raised; it is retried later.",
    "agent_tool:detached:delivery_failed": "A detached run's finish callback (or the global "
    "hook) raised; the slot stays undelivered and is retried.",
    "agent_tool:detached:live_count_warning": "More detached runs are live than the warning "
    "threshold.",
    "hook:on_finish": "A detached run's own `on_finish` callback is called for a slot "
    "(finish or give_up).",
    "hook:on_agent_tool_finish": "The global `on_agent_tool_finish` hook is called for a run.",
    "hook:delivered": "The slot's delivered mark is written: the finish was handed over "
    "exactly once.",
    "hook:milestone_delivered": "A detached run's milestone was delivered to the parent.",
    "chat:child_run:reconciled": "A chat parent reconciled a stale agent-tool run row at startup.",
    "chat:recovery:rebind": "Chat recovery re-binds an interrupted turn's agent-tool run to "
    "the recovering request.",
    "chat:recovery:detected": (
        "0.32.0: a chat turn's recovery incident is opened (its first interruption, or its "
        "first stalled model stream)."
    ),
    "chat:recovery:scheduled": "An interrupted chat turn is scheduled for recovery (0.32.0: "
    "also a turn whose model stream stalled).",
    "chat:recovery:attempt": "Chat recovery tries to complete the interrupted answer (0.32.0: "
    "each wake, or stall, that judges the turn reports it, before anything runs).",
    "chat:recovery:settled": "Chat recovery ended the turn: its status.",
    "chat:recovery:completed": (
        "0.32.0: a recovered chat turn completed; its incident (`incidentId`: the request first "
        "interrupted and the latest user message) is deleted."
    ),
    "chat:recovery:failed": (
        "0.32.0: a chat turn's recovery failed (the recovered turn ended in an error or was "
        "aborted, recovery raised, or on_chat_recovery raised for a stall): why; the incident "
        "stays, `failed`."
    ),
    "chat:recovery:exhausted": (
        "Chat recovery gave up after its attempts: why (on 0.32.0 with the whole context "
        "on_exhausted is told)."
    ),
    "chat:recovery:skipped": (
        "0.32.0: chat recovery stopped without giving up: why (a turn waiting on the client, "
        "on_chat_recovery's skip, a stalled turn's recovery declined, a client's cancel of a "
        "recovery still waiting to run, or a conversation that moved on)."
    ),
    "mcp:connected": "An MCP server connection was made or restored at startup.",
    # -- the built-in workloads (scenarios.workloads) ----------------------------------------
    "workload:stashed": "A fibers-workload step stashed its progress.",
    "workload:resumed": "Its recovery hook resumes a fiber from the stash.",
    "workload:deleted": (
        "A fibers workload's forget called delete_fibers: what it answered and deleted, beside "
        "the spec's count and the rows it must and may take (listings_match)."
    ),
    "workload:dropped": "Its recovery hook drops a fiber (nothing stashed to resume from).",
    "workload:cancel": "A fibers-workload fiber was asked to cancel.",
    "workload:fiber_done": "A fibers-workload fiber finished its steps.",
    "workload:fiber_failed": "A fibers-workload fiber's scripted failure struck.",
    "workload:fiber_cancelled": "A fibers-workload fiber stopped on its cancel.",
    "workload:waited": (
        "A fibers workload's start_waiting returned: the status a waiting start_fiber answered "
        "(waited_status_settled)."
    ),
    "workload:mcp_added": "A fibers workload registered an MCP server (mcp_servers_durable).",
    "workload:mcp_removed": "A fibers workload removed the MCP servers of one name.",
    "workload:held": "A fibers workload's hold gave back every keepAlive lease it took by hand.",
    "workload:hook_saw_mcp": "A fibers-workload recovery hook found these MCP servers connected.",
    "workload:duplicates_allowed": (
        "The schedules workload creates a schedule with idempotent: false (schedule_dedupe_keys)."
    ),
    "workload:destroying": (
        "The schedules workload calls destroy() on itself, at once or deferred to its next alarm."
    ),
    "workload:run_input": (
        "The tools workload dispatches a run with this input, as JSON text (input_preview_derived)."
    ),
    "workload:listed": (
        "A workload listed fibers or schedules, or started a fiber under an explicit id: the "
        "runtime's answer beside the spec's over the same rows (listings_match)."
    ),
    "workload:scheduled": "The schedules workload set up one of its schedules.",
    "workload:sub_agent_closed": "A schedules or fibers workload deleted one of its sub-agents.",
    "workload:sub_agent_opened": (
        "A schedules or fibers workload opened a sub-agent and set it up (or started its fibers)."
    ),
    "workload:schedule_run": "A schedules-workload callback starts an attempt.",
    "workload:schedule_done": "That attempt finished its work.",
    "workload:schedule_failed": "That attempt's scripted failure struck.",
    "workload:schedule_cancelled": "A schedules-workload schedule was cancelled.",
    "workload:schedule_fiber_dropped": "Its recovery hook dropped a schedule's fiber.",
    "workload:warmed_up": "The schedules workload's startup work finished.",
    "workload:on_finish": "The tools workload's built-in finish callback ran for a run.",
    "workload:on_finish_failed": "That callback's scripted failure struck (it is redelivered).",
    "workload:reported": "A workload child reported progress, a milestone or text to its "
    "parent, and how that went.",
    "workload:answered": "The chat workload answered a `say`: the request, status and text.",
}
"""When each literally named record is written, by name."""


# -- reading the source -------------------------------------------------------------------------
def emit_sites(root: Path = ROOT) -> dict[str, EmitSite]:
    """Every event name written with a literal name under `EMITTING_PACKAGES`, its fields and
    writers."""
    sites: dict[str, EmitSite] = {}
    for package in EMITTING_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            _scan(ast.parse(path.read_text(encoding="utf-8")), module, sites)
    return dict(sorted(sites.items()))


def _scan(tree: ast.Module, module: str, sites: dict[str, EmitSite]) -> None:
    def visit(node: ast.AST, function: str, loops: dict[str, tuple[str, ...]]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            names = _literal_names(node.iter)
            if names:  # `for event in ("a:b", "c:d"): self._emit(event, ...)`
                loops = {**loops, node.target.id: names}
        if isinstance(node, ast.Call):
            _call(node, f"{module}.{function}", loops, sites)
        for child in ast.iter_child_nodes(node):
            visit(child, function, loops)

    visit(tree, "<module>", {})


def _literal_names(node: ast.AST) -> tuple[str, ...]:
    if not isinstance(node, ast.Tuple | ast.List):
        return ()
    values = [
        item.value
        for item in node.elts
        if isinstance(item, ast.Constant) and isinstance(item.value, str)
    ]
    if len(values) != len(node.elts):
        return ()
    return tuple(values)


def _call(
    node: ast.Call, writer: str, loops: dict[str, tuple[str, ...]], sites: dict[str, EmitSite]
) -> None:
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    position = _EMITTERS.get(name)
    if position is None or len(node.args) <= position:
        return
    argument = node.args[position]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        events: Iterable[str] = (argument.value,)
    elif isinstance(argument, ast.Name) and argument.id in loops:
        events = loops[argument.id]
    else:
        return  # a name built at run time: one of FAMILIES
    fields = {keyword.arg or f"**{ast.unparse(keyword.value)}" for keyword in node.keywords}
    if name == "record" and len(node.args) > 3 and isinstance(node.args[3], ast.Dict):
        fields |= {
            key.value
            for key in node.args[3].keys
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        }
    for event in events:
        if _EVENT_NAME.fullmatch(event):
            site = sites.setdefault(event, EmitSite())
            site.fields |= fields
            site.writers.add(writer)


def family_of(event: str) -> Family | None:
    """The run-time family a name belongs to, if any."""
    for family in FAMILIES:
        if re.fullmatch(family.regex, event):
            return family
    return None


# -- the document -------------------------------------------------------------------------------
_HEADER = """\
# Trace events

<!-- Generated by `python -m scenarios.run.events_doc` from the code (scenarios/run/events_doc.py);
do not edit by hand: tests/unit/test_events_doc.py fails when this file and the code differ. -->

Every record of a trace has five reserved keys, `seq` (its place in the trace), `t` (sim time in
ms), `agent` (the agent path, `Class/name`, `Parent/p/Child/c` for a sub-agent, empty for the
platform), `inc` (the incarnation, 0 for the platform) and `event`, then the fields listed here.
The names are the SDK's where it has one (`fiber:recovery:skipped`); fields are camelCase where
the SDK's are, snake_case for the platform's own. Agent code may write records of its own with
`self.host.trace.emit("area:what", ...)` (the README's `user:resumed`); those are the agent's,
not listed here. Scenario expectations match records by these names and fields
(docs/scenario-language.md), and checkers read them (docs/checkers.md).
"""

_FAMILY_TITLES = {
    "simulation": "The simulation",
    "quiesce": "The simulation",
    "platform": "The platform",
    "incarnation": "The platform",
    "startup": "The platform",
    "delivery": "The platform",
    "facet": "The platform",
    "storage": "The platform",
    "task": "The platform",
    "upstream": "The platform",
    "fault": "The platform",
    "connection": "Connections",
    "connect": "Connections",
    "disconnect": "Connections",
    "alarm": "The alarm slot",
    "keep_alive": "keepAlive",
    "schedule": "Schedules",
    "fiber": "Fibers and their recovery",
    "agent_tool": "Agent tools",
    "hook": "Agent tools",
    "chat": "Chat",
    "mcp": "MCP",
    "workload": "The built-in workloads (scenarios.workloads)",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(root: Path = ROOT) -> str:
    """The text of `docs/events.md`."""
    sites = emit_sites(root)
    rows: dict[str, list[str]] = {}
    for event, site in sites.items():
        if family_of(event) is not None:
            continue
        fields = ", ".join(f"`{name}`" for name in sorted(site.fields)) or "(none)"
        modules = sorted({writer.rsplit(".", 1)[0] for writer in site.writers})
        writers = "<br>".join(f"`{module}`" for module in modules)
        when = WHEN.get(event, "**not described: add it to scenarios.run.events_doc.WHEN**")
        title = _FAMILY_TITLES.get(event.split(":", 1)[0], "Other records")
        rows.setdefault(title, []).append(f"| `{event}` | {fields} | {_cell(when)} | {writers} |")
    out = [_HEADER]
    order = list(dict.fromkeys(_FAMILY_TITLES.values())) + ["Other records"]
    for title in order:
        if title not in rows:
            continue
        out += [
            f"## {title}\n",
            "| event | fields | written when | written by |",
            "|---|---|---|---|",
        ]
        out += rows[title]
        out.append("")
    out += [
        "## Names built at run time\n",
        "| event | fields | written when | written by |",
        "|---|---|---|---|",
    ]
    for family in FAMILIES:
        fields = ", ".join(f"`{name}`" for name in family.fields)
        out.append(f"| `{family.pattern}` | {fields} | {_cell(family.when)} | `{family.writer}` |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write `docs/events.md` (`--check`: exit 1 if it is not current)."""
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        current = DOC_PATH.is_file() and DOC_PATH.read_text(encoding="utf-8") == text
        print(f"{DOC_PATH}: {'current' if current else 'out of date'}")
        return 0 if current else 1
    DOC_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
