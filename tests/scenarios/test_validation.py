"""Validation of the new sections (workloads, the model, the new steps and expectations): each
mistake is one line naming the file, the line, the part of the scenario (`agents.parent.runs[1]`,
`step 3 (evict)`, `expect 2 (hook)`), the field, the bad value and what is allowed."""

from __future__ import annotations

import re

import pytest

from scenarios import InvalidScenario, parse_scenario
from scenarios.language.schema import (
    ClientRunExpectation,
    Count,
    EvictStep,
    HookExpectation,
    InvariantsExpectation,
    OrderExpectation,
    RecordMatcher,
    StallModelStep,
)
from sim.checkers import CHECKERS
from sim.model import stall

KNOWN_INVARIANTS = sorted(CHECKERS)

BASE = """\
name: v
description: New sections under test.
seed: 1
agents:
  worker:
    workload: fibers
    fibers:
      - {name: ingest, steps: 5, step: 30s}
  parent:
    workload: tools
    runs:
      - {run_id: r1, detached: {on_finish: true}, steps: [{sleep: 1m}, {finish: completed}]}
  assistant: {workload: chat, host: think, model: {reply: hi}}
  counter: {class: "scenarios.workloads:Counter"}
clients:
  alice: {agent: parent}
model:
  rules:
    - {asked: research, reply: {text: found, chunks: 2}}
steps:
  - call: {agent: parent, method: dispatch}
  - evict: {agent: parent/r1}
  - stall_model: {for: 30s}
expect:
  - invariants: [exactly_once_finish]
  - hook: on_finish
    run: r1
    exactly: 1
  - order:
      - {event: platform:deploy}
      - {event: workload:on_finish, agent: parent}
  - client: alice
    run: r1
    reduced: {status: completed}
"""
"""Line 5 is agents.worker, 12 its run r1, 19 the model rule, 21-23 steps 1-3, 25- expect."""


def changed(*changes: str) -> str:
    """BASE with each (old, new) pair replaced once; a stale `old` fails the test loudly."""
    text = BASE
    for old, new in zip(changes[::2], changes[1::2], strict=True):
        assert old in text, f"{old!r} not in the base scenario"
        text = text.replace(old, new, 1)
    return text


def test_the_base_scenario_reads_into_the_new_dataclasses() -> None:
    """Workloads become classes with their plans; steps and expectations carry their fields."""
    scenario = parse_scenario(BASE, "lib/v.yaml")
    workloads = {spec.alias: spec.workload for spec in scenario.agents}
    assert workloads == {
        "worker": "fibers",
        "parent": "tools",
        "assistant": "chat",
        "counter": None,
    }
    assert [spec.path for spec in scenario.agents][:3] == [
        "FiberWorkload/worker",
        "ToolsWorkload/parent",
        "ThinkWorkload/assistant",
    ]
    assert scenario.agent("assistant").cls.model_service == "model/assistant"
    assert sorted(scenario.models) == ["model", "model/assistant"]
    _, evict, stall_step = scenario.steps
    assert evict == EvictStep(index=2, line=22, agent="parent", child=("r1",))
    same = changed(
        "evict: {agent: parent/r1}", "evict: {agent: parent, child: scripted, run_id: r1}"
    )
    assert parse_scenario(same).steps[1] == EvictStep(
        index=2, line=22, agent="parent", child=("r1",), child_class="ScriptedToolChild"
    )
    assert stall_step == StallModelStep(index=3, line=23, duration_ms=30_000, reply=stall(30_000))
    invariants, hook, order, client = scenario.expect
    assert invariants == InvariantsExpectation(index=1, line=25, names=("exactly_once_finish",))
    assert hook == HookExpectation(index=2, line=26, hook="on_finish", run="r1", count=Count(1, 1))
    assert order == OrderExpectation(
        index=3,
        line=29,
        matchers=(
            RecordMatcher(event="platform:deploy", line=30),
            RecordMatcher(event="workload:on_finish", agent="parent", line=31),
        ),
    )
    assert client == ClientRunExpectation(
        index=4, line=32, client="alice", agent="parent", run="r1", reduced={"status": "completed"}
    )


CASES = [
    (
        "workload-unknown",
        ("workload: fibers\n", "workload: fibres\n"),
        "lib/v.yaml:6: agents.worker: workload: 'fibres'; did you mean 'fibers'? allowed: "
        "['fibers', 'tools', 'chat', 'schedules']",
    ),
    (
        "workload-and-class",
        ("workload: fibers\n", "workload: fibers\n    class: x:Y\n"),
        "lib/v.yaml:7: agents.worker: both class: and workload:; give one of them",
    ),
    (
        "workload-key",
        ("    fibers:\n", "    runs: []\n    fibers:\n"),
        "lib/v.yaml:7: agents.worker: unknown key 'runs'; allowed keys: ['fibers', "
        "'keep_alive_interval', 'options', 'recovery', 'start', 'sub_agents', 'workload']",
    ),
    (
        "fiber-duplicate",
        (
            "      - {name: ingest, steps: 5, step: 30s}\n",
            "      - {name: ingest, steps: 5, step: 30s}\n      - {name: ingest, steps: 2}\n",
        ),
        "lib/v.yaml:9: agents.worker.fibers[2]: name: 'ingest' is already fibers[1]'s; fiber "
        "names must be unique in a workload",
    ),
    (
        "fiber-fail-at",
        ("{name: ingest, steps: 5, step: 30s}", "{name: ingest, steps: 5, step: 30s, fail_at: 6}"),
        "lib/v.yaml:8: agents.worker.fibers[1]: fail_at: 6; expected a step from 1 to 5 (the "
        "fiber has 5 steps)",
    ),
    (
        "fiber-key-unmanaged",
        ("{name: ingest, steps: 5, step: 30s}", "{name: ingest, steps: 5, idempotency_key: k}"),
        "lib/v.yaml:8: agents.worker.fibers[1]: idempotency_key: 'k'; only a managed fiber has "
        "one: add managed: true",
    ),
    (
        "fiber-steps",
        ("{name: ingest, steps: 5, step: 30s}", "{name: ingest, steps: 0}"),
        "lib/v.yaml:8: agents.worker.fibers[1]: steps: 0; expected a whole number from 1 to 100000",
    ),
    (
        "fiber-step-duration",
        ("{name: ingest, steps: 5, step: 30s}", "{name: ingest, steps: 5, step: 30 secs}"),
        "lib/v.yaml:8: agents.worker.fibers[1]: step: '30 secs'; expected a duration: whole "
        "numbers with units d, h, m, s, ms, largest first (e.g. '90s', '14m59s', '1h30m', "
        "'250ms'), or whole milliseconds, at most 366d",
    ),
    (
        "fiber-name",
        ("{name: ingest, steps: 5, step: 30s}", "{name: in gest, steps: 5}"),
        "lib/v.yaml:8: agents.worker.fibers[1]: name: 'in gest'; expected a name of letters "
        "(any script), digits, '.', '_' and '-', not starting with '.' or '-' (at most 100, no "
        "spaces or '/')",
    ),
    (
        "fibers-recovery",
        ("    fibers:\n", "    recovery: retry\n    fibers:\n"),
        "lib/v.yaml:7: agents.worker: recovery: 'retry'; allowed: ['resume', 'drop', 'throw']",
    ),
    (
        "fibers-start",
        ("    fibers:\n", "    start: later\n    fibers:\n"),
        "lib/v.yaml:7: agents.worker: start: 'later'; allowed: ['on_start', 'call']",
    ),
    (
        "fibers-keep-alive-twice",
        (
            "    fibers:\n",
            "    keep_alive_interval: 2s\n"
            "    options: {keep_alive_interval_ms: 2000}\n"
            "    fibers:\n",
        ),
        "lib/v.yaml:7: agents.worker: both keep_alive_interval: and "
        "options.keep_alive_interval_ms; give one of them",
    ),
    (
        "workload-option-overrides-description",
        ("    fibers:\n", "    options: {recovery: throw}\n    fibers:\n"),
        "lib/v.yaml:7: agents.worker: options: 'recovery' is part of the workload's "
        "description; write the workload's own keys instead (['workload', 'fibers', 'start', "
        "'keep_alive_interval', 'recovery', 'sub_agents', 'options'])",
    ),
    (
        "fibers-empty",
        ("    fibers:\n      - {name: ingest, steps: 5, step: 30s}\n", "    fibers: []\n"),
        "lib/v.yaml:7: agents.worker: fibers: []; expected a list of at least 1 item",
    ),
    (
        "run-duplicate",
        (
            "steps: [{sleep: 1m}, {finish: completed}]}\n",
            "steps: [{sleep: 1m}, {finish: completed}]}\n      - {run_id: r1}\n",
        ),
        "lib/v.yaml:13: agents.parent.runs[2]: run_id: 'r1' is already runs[1]'s; run ids must "
        "be unique in a workload",
    ),
    (
        "run-child",
        ("{run_id: r1, detached", "{run_id: r1, child: robot, detached"),
        "lib/v.yaml:12: agents.parent.runs[1]: child: 'robot'; allowed: ['scripted', 'think', "
        "'chat']",
    ),
    (
        "run-steps-for-think",
        ("{run_id: r1, detached", "{run_id: r1, child: think, detached"),
        "lib/v.yaml:12: agents.parent.runs[1]: steps: [{'sleep': '1m'}, {'finish': "
        "'completed'}] for a think child; a scripted child plays steps (and may resume them, and "
        "carry a brief); a think or chat child answers its input: from the model",
    ),
    (
        "run-input-for-scripted",
        ("{run_id: r1, detached", "{run_id: r1, input: hello, detached"),
        "lib/v.yaml:12: agents.parent.runs[1]: input: 'hello' for a scripted child; a scripted "
        "child plays steps (and may resume them, and carry a brief); a think or chat child answers "
        "its input: from the model",
    ),
    (
        "run-notify-plain",
        ("detached: {on_finish: true}", "detached: {notify: true}"),
        "lib/v.yaml:12: agents.parent.runs[1].detached: notify: True on a plain agent parent; "
        "it narrates in the parent's chat: give the workload host: think or chat",
    ),
    (
        "run-notify-and-on-finish",
        (
            "    workload: tools\n",
            "    workload: tools\n    host: think\n",
            "detached: {on_finish: true}",
            "detached: {on_finish: true, notify: true}",
        ),
        "lib/v.yaml:13: agents.parent.runs[1].detached: both on_finish: true and notify: true; "
        "each names the run's finish callback; give one of them",
    ),
    (
        "run-detached-type",
        ("detached: {on_finish: true}", "detached: soon"),
        "lib/v.yaml:12: agents.parent.runs[1]: detached: 'soon'; expected true, false, or a "
        "mapping of detached options",
    ),
    (
        "run-budget",
        ("detached: {on_finish: true}", "detached: {max_budget: an hour}"),
        "lib/v.yaml:12: agents.parent.runs[1].detached: max_budget: 'an hour'; expected a "
        "duration: whole numbers with units d, h, m, s, ms, largest first (e.g. '90s', "
        "'14m59s', '1h30m', '250ms'), or whole milliseconds, at most 366d",
    ),
    (
        "run-milestones",
        (
            "    workload: tools\n",
            "    workload: tools\n    host: chat\n",
            "detached: {on_finish: true}",
            "detached: {on_milestones: {names: [a], mode: shout}}",
        ),
        "lib/v.yaml:13: agents.parent.runs[1].detached: mode: 'shout'; allowed: ['narrate', "
        "'react']",
    ),
    (
        "child-step-unknown",
        ("{sleep: 1m}, {finish", "{nap: 1m}, {finish"),
        "lib/v.yaml:12: agents.parent.runs[1].steps[1]: {'nap': '1m'}; each step is one mapping"
        " of {text: words}, {progress: {fraction, message, phase}}, {milestone: name}, {sleep: "
        "1m}, {finish: completed}, {hang: true}, {chunk: {type: ..., ...}}",
    ),
    (
        "child-step-two-keys",
        ("{sleep: 1m}, {finish", "{sleep: 1m, text: a}, {finish"),
        "lib/v.yaml:12: agents.parent.runs[1].steps[1]: {'sleep': '1m', 'text': 'a'}; each step"
        " is one mapping of {text: words}, {progress: {fraction, message, phase}}, {milestone: "
        "name}, {sleep: 1m}, {finish: completed}, {hang: true}, {chunk: {type: ..., ...}}",
    ),
    (
        "child-finish",
        ("{finish: completed}", "{finish: done}"),
        "lib/v.yaml:12: agents.parent.runs[1].steps[2]: finish: 'done'; allowed: ['completed', "
        "'error']",
    ),
    (
        "child-hang",
        ("{finish: completed}", "{hang: false}"),
        "lib/v.yaml:12: agents.parent.runs[1].steps[2]: hang: False; expected true (the run "
        "never ends)",
    ),
    (
        "child-progress",
        ("{finish: completed}", "{progress: {fraction: 2}}"),
        "lib/v.yaml:12: agents.parent.runs[1].steps[2]: fraction: 2; expected a number from 0 to 1",
    ),
    (
        "chat-host",
        ("host: think, model", "host: gpt, model"),
        "lib/v.yaml:13: agents.assistant: host: 'gpt'; allowed: ['think', 'chat']",
    ),
    (
        "chat-model-chunks",
        ("model: {reply: hi}", "model: {reply: hi, chunks: 0}"),
        "lib/v.yaml:13: agents.assistant.model: chunks: 0; expected a whole number from 1 to 10000",
    ),
    (
        "model-rule-key",
        ("{asked: research, reply", "{askd: research, reply"),
        "lib/v.yaml:19: model.rules[1]: unknown key 'askd'; did you mean 'asked'? allowed keys: "
        "['after_tool', "
        "'asked', 'continuing', 'offers', 'reply']",
    ),
    (
        "model-reply-kind",
        ("reply: {text: found, chunks: 2}", "reply: {say: found}"),
        "lib/v.yaml:19: model.rules[1]: reply: {'say': 'found'}; a reply is one of {text: ...},"
        " {tool_calls: [{name: ...}]}, {stall: 30s}, {fail: message}",
    ),
    (
        "model-reply-empty-list",
        ("reply: {text: found, chunks: 2}", "reply: []"),
        "lib/v.yaml:19: model.rules[1]: reply: []; expected a reply or a non-empty list of "
        "replies; a reply is one of {text: ...}, {tool_calls: [{name: ...}]}, {stall: 30s}, "
        "{fail: message}",
    ),
    (
        "model-after-tool",
        ("{asked: research, reply", "{after_tool: '', reply"),
        "lib/v.yaml:19: model.rules[1]: after_tool: ''; expected a tool name, or true for any tool",
    ),
    (
        "model-stall-then",
        ("reply: {text: found, chunks: 2}", "reply: {stall: 1s, then: 5}"),
        "lib/v.yaml:19: model.rules[1]: then: 5; a reply is one of {text: ...}, {tool_calls: "
        "[{name: ...}]}, {stall: 30s}, {fail: message}",
    ),
    (
        "model-fail-chunks",
        ("reply: {text: found, chunks: 2}", "reply: {fail: boom, after_chunks: -1}"),
        "lib/v.yaml:19: model.rules[1]: after_chunks: -1; expected a whole number from 0 to "
        "9223372036854775807",
    ),
    (
        "evict-unknown-run",
        ("evict: {agent: parent/r1}", "evict: {agent: parent/r2}"),
        "lib/v.yaml:22: step 2 (evict): agent 'parent' has no run 'r2'; its runs (each child is"
        " named by its run id): ['r1']",
    ),
    (
        "evict-run-id-key",
        ("evict: {agent: parent/r1}", "evict: {agent: parent, run_id: r9}"),
        "lib/v.yaml:22: step 2 (evict): agent 'parent' has no run 'r9'; its runs (each child is"
        " named by its run id): ['r1']",
    ),
    (
        "evict-path-and-run-id",
        ("evict: {agent: parent/r1}", "evict: {agent: parent/r1, run_id: r1}"),
        "lib/v.yaml:22: step 2 (evict): both agent: 'parent/r1' and run_id:; give one",
    ),
    (
        "evict-child-without-run-id",
        ("evict: {agent: parent/r1}", "evict: {agent: parent/r1, child: scripted}"),
        "lib/v.yaml:22: step 2 (evict): child: 'scripted' without run_id:; child: is the "
        "sub-agent's class; run_id: is its name",
    ),
    (
        "evict-child-class-mismatch",
        ("evict: {agent: parent/r1}", "evict: {agent: parent, child: think, run_id: r1}"),
        "lib/v.yaml:22: step 2 (evict): child: 'think'; run 'r1' runs a scripted child "
        "(ScriptedToolChild)",
    ),
    (
        "evict-child-class-name",
        ("evict: {agent: parent/r1}", "evict: {agent: parent, child: 'a b', run_id: r1}"),
        "lib/v.yaml:22: step 2 (evict): child: 'a b'; expected the sub-agent's class name, or "
        "scripted, think or chat",
    ),
    (
        "evict-fibers-child",
        ("evict: {agent: parent/r1}", "evict: {agent: worker/f}"),
        "lib/v.yaml:22: step 2 (evict): agent: 'worker/f'; a fibers workload has no sub-agents "
        "(list them in its sub_agents:)",
    ),
    (
        "evict-bad-path",
        ("evict: {agent: parent/r1}", "evict: {agent: parent//r1}"),
        "lib/v.yaml:22: step 2 (evict): agent: 'parent//r1'; expected an alias, or alias/name "
        "for a sub-agent, each part a name of letters (any script), digits, '.', '_' and '-', "
        "not starting with '.' or '-' (at most 100, no spaces or '/')",
    ),
    (
        "evict-unknown-parent",
        ("evict: {agent: parent/r1}", "evict: {agent: parnt/r1}"),
        "lib/v.yaml:22: step 2 (evict): unknown agent 'parnt'; did you mean 'parent'? known "
        "agents: ['assistant', 'counter', 'parent', 'worker']",
    ),
    (
        "stall-no-own-model",
        ("stall_model: {for: 30s}", "stall_model: {agent: counter, for: 30s}"),
        "lib/v.yaml:23: step 3 (stall_model): agent 'counter' has no model of its own; only a "
        "chat workload with model: has one; omit agent: to re-script the scenario's model (the "
        "one every other chat agent streams from)",
    ),
    (
        "stall-for",
        ("stall_model: {for: 30s}", "stall_model: {for: a while}"),
        "lib/v.yaml:23: step 3 (stall_model): for: 'a while'; expected a duration: whole "
        "numbers with units d, h, m, s, ms, largest first (e.g. '90s', '14m59s', '1h30m', "
        "'250ms'), or whole milliseconds, at most 366d",
    ),
    (
        "stall-missing-for",
        ("stall_model: {for: 30s}", "stall_model: {then: {text: x}}"),
        "lib/v.yaml:23: step 3 (stall_model): missing key 'for'; required keys: ['for']",
    ),
    (
        "stall-times",
        ("stall_model: {for: 30s}", "stall_model: {for: 30s, times: 0}"),
        "lib/v.yaml:23: step 3 (stall_model): times: 0; expected a whole number from 1 to "
        "9223372036854775807",
    ),
    (
        "fail-model-message",
        ("stall_model: {for: 30s}", "fail_model: {after_chunks: 2}"),
        "lib/v.yaml:23: step 3 (fail_model): missing key 'message'; required keys: ['message']",
    ),
    (
        "fail-model-in-band",
        ("stall_model: {for: 30s}", "fail_model: {message: x, in_band: yes please}"),
        "lib/v.yaml:23: step 3 (fail_model): in_band: 'yes please'; expected true or false",
    ),
    (
        "deploy-all-args",
        ("stall_model: {for: 30s}", "deploy_all: {agent: parent}"),
        "lib/v.yaml:23: step 3 (deploy_all): unknown key 'agent'; allowed keys: ['sdk']",
    ),
    (
        "advance-args",
        ("stall_model: {for: 30s}", "advance_to_next_alarm: 5m"),
        "lib/v.yaml:23: step 3 (advance_to_next_alarm): advance_to_next_alarm: '5m'; expected a"
        " mapping with keys []",
    ),
    (
        "invariants-unknown",
        ("invariants: [exactly_once_finish]", "invariants: [exactly_once_finsh]"),
        "lib/v.yaml:25: expect 1 (invariants): unknown invariant 'exactly_once_finsh'; did you "
        f"mean 'exactly_once_finish'? known invariants: {KNOWN_INVARIANTS}, or all",
    ),
    (
        "invariants-empty",
        ("invariants: [exactly_once_finish]", "invariants: []"),
        "lib/v.yaml:25: expect 1 (invariants): invariants: []; expected a list of names or all;"
        f" known invariants: {KNOWN_INVARIANTS}",
    ),
    (
        "invariants-type",
        ("invariants: [exactly_once_finish]", "invariants: some"),
        "lib/v.yaml:25: expect 1 (invariants): invariants: 'some'; expected a list of names or "
        f"all; known invariants: {KNOWN_INVARIANTS}",
    ),
    (
        "hook-name",
        ("  - hook: on_finish\n", "  - hook: on_done\n"),
        "lib/v.yaml:26: expect 2 (hook): hook: 'on_done'; allowed: ['on_finish', "
        "'on_agent_tool_finish', 'delivered', 'workload_on_finish']",
    ),
    (
        "hook-count-twice",
        ("    exactly: 1\n", "    exactly: 1\n    count: {exactly: 1}\n"),
        "lib/v.yaml:28: expect 2 (hook): both count: and exactly:; give one of them",
    ),
    (
        "hook-count-shape",
        ("    exactly: 1\n", "    exactly: 1\n    never: true\n"),
        "lib/v.yaml:29: expect 2 (hook): both exactly: and never:; give one of them",
    ),
    (
        "hook-run-unknown",
        (
            "  - hook: on_finish\n    run: r1\n",
            "  - hook: on_finish\n    agent: parent\n    run: r2\n",
        ),
        "lib/v.yaml:28: expect 2 (hook): agent 'parent' has no run 'r2'; its runs: ['r1']",
    ),
    (
        "hook-slot",
        ("  - hook: on_finish\n", "  - hook: workload_on_finish\n    slot: finish\n"),
        "lib/v.yaml:27: expect 2 (hook): slot: 'finish' for workload_on_finish; its records "
        "have no slot; count on_finish or delivered to tell slots apart",
    ),
    (
        "hook-slot-value",
        ("  - hook: on_finish\n", "  - hook: on_finish\n    slot: last\n"),
        "lib/v.yaml:27: expect 2 (hook): slot: 'last'; allowed: ['finish', 'give_up']",
    ),
    (
        "order-one",
        (
            "      - {event: platform:deploy}\n"
            "      - {event: workload:on_finish, agent: parent}\n",
            "      - {event: platform:deploy}\n",
        ),
        "lib/v.yaml:29: expect 3 (order): order: [{'event': 'platform:deploy'}]; expected a "
        "list of at least two matchers {event: name, agent, incarnation, fields}",
    ),
    (
        "order-agent",
        ("{event: workload:on_finish, agent: parent}", "{event: workload:on_finish, agent: parnt}"),
        "lib/v.yaml:31: expect 3 (order) matcher 2: unknown agent 'parnt'; did you mean "
        "'parent'? known agents: ['assistant', 'counter', 'parent', 'worker']",
    ),
    (
        "order-key",
        ("{event: workload:on_finish, agent: parent}", "{event: workload:on_finish, count: 1}"),
        "lib/v.yaml:31: expect 3 (order) matcher 2: unknown key 'count'; did you mean "
        "'contains'? allowed keys: ['agent', 'contains', 'event', 'fields', 'incarnation']",
    ),
    (
        "order-reserved",
        (
            "{event: workload:on_finish, agent: parent}",
            "{event: workload:on_finish, fields: {seq: 1}}",
        ),
        "lib/v.yaml:31: expect 3 (order) matcher 2: fields: 'seq' is not a field of the record;"
        " use agent: and incarnation: to match where a record is from",
    ),
    (
        "client-unknown",
        ("  - client: alice\n", "  - client: bob\n"),
        "lib/v.yaml:32: expect 4 (client): unknown client 'bob'; known clients: ['alice'] "
        "(declared under clients:, or connected by a step)",
    ),
    (
        "client-neither",
        ("    reduced: {status: completed}\n", ""),
        "lib/v.yaml:32: expect 4 (client): keys ['client', 'run']; a client expectation has "
        "frames: {type, kind, run, fields, count} to count, or run: and reduced: {status, text,"
        " ...} for what its reducer shows",
    ),
    (
        "client-run-unknown",
        ("    run: r1\n    reduced", "    run: r2\n    reduced"),
        "lib/v.yaml:33: expect 4 (client): agent 'parent' has no run 'r2'; its runs: ['r1']",
    ),
    (
        "client-reduced-status",
        ("reduced: {status: completed}", "reduced: {status: done}"),
        "lib/v.yaml:34: expect 4 (client): status: 'done'; allowed: ['running', 'completed', "
        "'error', 'aborted', 'interrupted']",
    ),
    (
        "client-reduced-key",
        ("reduced: {status: completed}", "reduced: {colour: red}"),
        "lib/v.yaml:34: expect 4 (client): unknown key 'colour'; allowed keys: ['error', "
        "'milestones', 'progress', 'reason', 'status', 'summary', 'text']",
    ),
    (
        "client-reduced-empty",
        ("reduced: {status: completed}", "reduced: {}"),
        "lib/v.yaml:34: expect 4 (client): reduced: {}; expected at least one of ['status', "
        "'text', 'summary', 'error', 'reason', 'milestones', 'progress']",
    ),
    (
        "client-reduced-milestones",
        ("reduced: {status: completed}", "reduced: {milestones: [halfway, 3]}"),
        "lib/v.yaml:34: expect 4 (client): milestones: ['halfway', 3]; item 2 is not a "
        "non-empty string",
    ),
    (
        "client-reduced-error-type",
        ("reduced: {status: completed}", "reduced: {error: 3}"),
        "lib/v.yaml:34: expect 4 (client): error: 3; expected a string, or null",
    ),
    (
        "client-frames-key",
        (
            "    run: r1\n    reduced: {status: completed}\n",
            "    frames: {type: x, kinds: finished}\n",
        ),
        "lib/v.yaml:33: expect 4 (client): unknown key 'kinds'; did you mean 'kind'? allowed "
        "keys: ['count', "
        "'fields', 'kind', 'run', 'type']",
    ),
    (
        "client-frames-count",
        (
            "    run: r1\n    reduced: {status: completed}\n",
            "    frames: {type: x, count: {exactly: -1}}\n",
        ),
        "lib/v.yaml:33: expect 4 (client): exactly: -1; expected a whole number from 0 to "
        "9223372036854775807",
    ),
]


@pytest.mark.parametrize(("changes", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_new_field_error_is_one_located_line(changes: tuple[str, ...], message: str) -> None:
    """The message is exactly as pinned: file:line: part: field: value; allowed."""
    with pytest.raises(InvalidScenario, match="^" + re.escape(message) + "$") as caught:
        parse_scenario(changed(*changes), "lib/v.yaml")
    assert "\n" not in str(caught.value)


def test_invariants_all_names_every_registered_invariant() -> None:
    """`invariants: all` is every checker, in registration order."""
    from sim.checkers import CHECKERS

    text = changed("invariants: [exactly_once_finish]", "invariants: all")
    (invariants, *_) = parse_scenario(text).expect
    assert invariants.names == tuple(CHECKERS)


def test_a_hook_count_may_be_inline_or_a_count_mapping() -> None:
    """`exactly: 1` beside the hook and `count: {exactly: 1}` mean the same."""
    inline = parse_scenario(BASE).expect[1]
    nested = parse_scenario(changed("    exactly: 1\n", "    count: {exactly: 1}\n")).expect[1]
    assert inline.count == nested.count == Count(1, 1)
    default = parse_scenario(changed("    exactly: 1\n", "")).expect[1]
    assert default.count == Count(1, None)
