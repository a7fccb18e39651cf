"""The new expectations, run: named invariants, hook counts, record order and client timelines
each pass on a run where they hold and fail with a sentence that says what was expected and what
the trace shows, with the replay command last."""

from __future__ import annotations

import pytest

from scenarios import parse_scenario, run_scenario
from scenarios.run.runner import ScenarioResult
from sim.checkers import CHECKERS, CheckContext, Violation, register
from tests.scenarios.helpers import TOOLS

LOSSY = """\
name: lossy
description: A worker whose recovery hook forgets its stash and starts over.
seed: 4
agents:
  worker: {class: "tests.checkers.agents:Forgetful"}
steps:
  - call: {agent: worker, method: work, args: [3]}
  - at: 25s
    deploy_all: {}
expect:
"""
"""Line 11 is the first expectation."""


def run(text: str, path: str = "x.yaml") -> ScenarioResult:
    return run_scenario(parse_scenario(text, path))


# -- invariants -----------------------------------------------------------------------------------
def test_a_broken_invariant_is_one_sentence_per_violation() -> None:
    """no_lost_stash catches the forgetful hook: the checker's sentence, under the expectation,
    and the report ends with the replay command."""
    result = run(LOSSY + "  - invariants: [no_lost_stash, exactly_once_finish]\n")
    (failure,) = result.failures
    assert failure.startswith(
        "x.yaml:11: expect 1 (invariants): no_lost_stash: fiber LK0VsoDq4msnBLTNHmkqL of "
        "Forgetful/worker stashed step 2 at 00:00:20.000, its incarnation 1 ended (deploy) at "
        "00:00:25.000, and its recovery resumed it from step 0 at 00:00:26.000: the stash was "
        "lost [records #"
    )
    assert result.report().splitlines()[-1] == "  replay: agentsim run x.yaml --seed 4"


def test_invariants_that_hold_add_nothing() -> None:
    """The same run checked only for what holds passes; `all` on a healthy story passes too."""
    assert run(LOSSY + "  - invariants: [exactly_once_finish, schedules_fire]\n").passed
    healthy = TOOLS.read_text()
    assert "  - invariants: all\n" in healthy and run(healthy).passed


def test_invariants_read_the_run_as_it_ends_after_the_liveness_phase() -> None:
    """The checkers get `context_from(sim, scenario=path)` once quiesce ended: the end time,
    the liveness verdict and the scenario's path (for their replay command)."""

    def probe(context: CheckContext) -> list[Violation]:
        seen = f"end {context.end_ms} quiet {context.quiet} scenario {context.scenario}"
        return [Violation("probe_end", "", "", seen)]

    register("probe_end", probe)
    try:
        result = run(LOSSY + "  - invariants: [probe_end]\n")
    finally:
        CHECKERS.pop("probe_end", None)
    assert result.failures == (
        "x.yaml:11: expect 1 (invariants): probe_end: end 177472 quiet True scenario x.yaml",
    )


# -- hooks ----------------------------------------------------------------------------------------
def test_a_hook_that_never_ran_says_so() -> None:
    """The count, the filters, the record it counts, and that there were none."""
    result = run(LOSSY + "  - hook: on_finish\n    run: r1\n    exactly: 1\n")
    assert result.failures == (
        "x.yaml:11: expect 1 (hook): expected exactly 1 on_finish call for run r1 "
        "(hook:on_finish records); found 0; the hook never ran",
    )


def test_a_hook_count_lists_the_calls_that_nearly_matched() -> None:
    """Near misses: the records of that hook with another status, time and fields shown."""
    text = TOOLS.read_text().replace(
        "    run: import\n    slot: finish\n    status: completed\n",
        "    run: import\n    slot: finish\n    status: error\n",
    )
    assert run(text).failures == (
        "x.yaml:41: expect 3 (hook): expected exactly 1 on_finish call for run import of parent "
        "(ToolsWorkload/parent) with slot 'finish' and status 'error' (hook:on_finish "
        "records); found 0; hook:on_finish records: hook:on_finish ToolsWorkload/parent#2 at "
        "00:16:50.000 (runId='import', slot='finish', status='completed', "
        "callback='workload_on_finish')",
    )


# -- order ----------------------------------------------------------------------------------------
def test_order_holds_when_the_records_come_in_that_order() -> None:
    """A subsequence of the trace, each matcher after the record the previous one placed."""
    order = (
        "  - order:\n"
        "      - {event: workload:stashed, agent: worker, fields: {step: 2}}\n"
        "      - {event: incarnation:end, agent: worker, fields: {reason: deploy}}\n"
        "      - {event: workload:resumed, agent: worker, incarnation: 2}\n"
    )
    assert run(LOSSY + order).passed


def test_order_names_the_record_that_came_too_early() -> None:
    """The matcher that could not be placed, the one before it, and when it did happen."""
    order = (
        "  - order:\n"
        "      - {event: workload:resumed, agent: worker}\n"
        "      - {event: platform:deploy}\n"
    )
    assert run(LOSSY + order).failures == (
        "x.yaml:11: expect 1 (order): expected record 2 of the order, 'platform:deploy', after "
        "'workload:resumed' of worker (first at 00:00:26.000, #106); it only happened before: "
        "platform:deploy platform at 00:00:25.000 (cause='scripted')",
    )


def test_order_names_a_record_that_never_happened() -> None:
    """A matcher nothing matches is named with its filters."""
    order = (
        "  - order:\n"
        "      - {event: 'incarnation:*', agent: worker}\n"
        "      - {event: workload:resumed, fields: {step: 2}}\n"
    )
    assert run(LOSSY + order).failures == (
        "x.yaml:11: expect 1 (order): expected record 2 of the order, 'workload:resumed' with "
        "step=2; no record matches it",
    )


# -- clients --------------------------------------------------------------------------------------
def tools_with(old: str, new: str) -> str:
    text = TOOLS.read_text()
    assert old in text
    return text.replace(old, new, 1)


def test_client_frames_count_what_the_client_received() -> None:
    """Filters by frame type, agent-tool-event kind, run and fields; the sentence lists them."""
    text = tools_with(
        "kind: finished, run: lookup, count: {exactly: 2}}",
        "kind: finished, run: lookup, count: {exactly: 3}}",
    )
    (failure,) = run(text).failures
    assert failure.startswith(
        "x.yaml:56: expect 6 (client): expected client alice (of parent) to receive exactly 3 "
        "frames with type 'agent-tool-event', kind 'finished', run 'lookup'; found 2 of the 13 "
        "it received: at 00:00:01.000 {'event': {'kind': 'finished', 'runId': 'lookup', "
    )


def test_client_frames_see_every_connection_of_that_client_only() -> None:
    """Frames sent to another client of the same agent are not this client's."""
    text = tools_with(
        "  - connect: {client: alice}\n",
        "  - connect: {client: alice}\n  - connect: {client: eve, agent: parent}\n",
    ).replace("  - client: alice\n    run: lookup\n", "  - client: eve\n    run: lookup\n")
    assert run(text).passed


def test_the_reduced_run_is_what_the_client_s_reducer_shows() -> None:
    """Every frame once through AgentToolEvents; each differing key is named with both values."""
    text = tools_with(
        "reduced: {status: completed, summary: found, text: found it}",
        "reduced: {status: error, summary: found, text: found them, milestones: [done]}",
    )
    (failure,) = run(text).failures
    assert failure == (
        "x.yaml:65: expect 8 (client): client alice (of parent) shows run lookup with status "
        "'completed' (expected 'error'), text 'found it' (expected 'found them'), milestones "
        "[] (expected ['done'])"
    )


def test_a_run_the_client_never_saw_is_named_with_the_runs_it_did() -> None:
    """A declared client that never connected received nothing."""
    text = tools_with(
        "  alice: {agent: parent}\n", "  alice: {agent: parent}\n  bob: {agent: parent}\n"
    )
    text += "  - client: bob\n    run: import\n    reduced: {status: completed}\n"
    assert run(text).failures == (
        "x.yaml:79: expect 12 (client): client bob (of parent) never saw run import; runs it "
        "saw: [] (0 frames received)",
    )


WATCHED = """\
name: watched
description: A client watches a run report progress, a milestone and text, live.
seed: 2
agents:
  parent:
    workload: tools
    runs:
      - run_id: r1
        detached: true
        steps:
          - sleep: 1s
          - milestone: {name: halfway, data: {rows: 10}}
          - progress: {fraction: 0.5, message: half}
          - text: "all "
          - text: done
          - finish: {status: completed, summary: ok}
clients:
  alice: {agent: parent}
steps:
  - connect: {client: alice}
  - call: {agent: parent, method: dispatch}
expect:
  - client: alice
    run: r1
    reduced:
      status: completed
      summary: ok
      text: all done
      milestones: [halfway]
      progress: {message: half, fraction: 0.5}
"""


def test_a_live_run_reduces_to_its_progress_milestones_and_text() -> None:
    """Progress is compared on the fields given, milestones by name, text joined."""
    assert run(WATCHED).passed


@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        (
            "milestones: [halfway]",
            "milestones: [started, halfway]",
            "milestones ['halfway'] (expected ['started', 'halfway'])",
        ),
        (
            "progress: {message: half, fraction: 0.5}",
            "progress: {fraction: 0.75}",
            "progress "
            "{'at': 1000, 'fraction': 0.5, 'message': 'half'} (expected {'fraction': 0.75})",
        ),
    ],
    ids=["milestones", "progress"],
)
def test_a_reduced_mismatch_shows_what_the_reducer_kept(old: str, new: str, shown: str) -> None:
    """The sentence shows the client's value beside the expected one."""
    (failure,) = run(WATCHED.replace(old, new)).failures
    assert (
        failure
        == f"x.yaml:23: expect 1 (client): client alice (of parent) shows run r1 with {shown}"
    )
