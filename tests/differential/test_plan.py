"""The plan compiler turns a scenario and its agentsim run into timed actions, exports the
evictions the simulator drew, and refuses what only agentsim can do, naming the step."""

from __future__ import annotations

from pathlib import Path

from scenarios.diff.plan import compile_plan
from scenarios.language.loader import load_scenario

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios" / "library"


def _compile(name: str):
    return compile_plan(load_scenario(str(LIBRARY / f"{name}.yaml")))


def test_idle_eviction_is_exported_at_the_instant_agentsim_drew() -> None:
    """The idle timeout agentsim drew becomes an evict action between the two calls."""
    compiled = _compile("idle-eviction")
    assert compiled.skip is None and compiled.plan is not None
    ends = [t for t, _seq, _alias, reason in compiled.python.evictions if reason == "idle"]
    actions = [(a["t"], a["do"]) for a in compiled.plan["actions"] if a["do"] != "snapshot"]
    assert actions == [(0, "call"), (ends[0], "evict"), (300_000, "call"), (ends[1], "evict")]
    assert 70_000 <= ends[0] <= 140_000


def test_a_scripted_deploy_evicts_at_its_step() -> None:
    """deploy-mid-work: the deploy at 70 s is an evict action of the worker at 70 s, before
    the call 30 s later."""
    compiled = _compile("deploy-mid-work")
    assert compiled.plan is not None
    actions = [(a["t"], a["do"], a.get("agent")) for a in compiled.plan["actions"]]
    assert (70_000, "evict", "worker") in actions
    assert actions.index((70_000, "evict", "worker")) < actions.index((100_000, "call", "worker"))
    assert compiled.plan["agents"]["worker"] == {"class": "Counter", "options": {"step_ms": 20_000}}


def test_a_storage_fault_step_is_refused_naming_the_step() -> None:
    """storage-crash-mid-turn is skipped at its arm_storage_fault step, as Python-only."""
    compiled = _compile("storage-crash-mid-turn")
    assert compiled.plan is None
    assert "arm_storage_fault" in compiled.skip.where
    assert "Python-only" in compiled.skip.why or "only in agentsim" in compiled.skip.why


def test_the_alarm_limit_kill_is_refused() -> None:
    """alarm-limit-kills-long-handler needs the 15-minute kill, which workerd's pool lacks."""
    compiled = _compile("alarm-limit-kills-long-handler")
    assert compiled.plan is None
    assert "15-minute" in compiled.skip.why


def test_an_agent_without_a_player_is_refused() -> None:
    """A scenario whose agent class has no player on the real side is skipped, naming it."""
    compiled = _compile("child-reset-is-retryable")
    assert compiled.plan is None
    assert "no player" in compiled.skip.why


def test_every_python_only_step_is_marked_in_the_schema() -> None:
    """The step kinds the plan compiler refuses say "Python-only" in the scenario schema, so a
    scenario's author sees it in the editor, not only in a SKIP line."""
    from scenarios.diff.plan import PYTHON_ONLY_STEPS
    from scenarios.language.step_shapes import STEP_SHAPES

    kinds = [step.kind for step in PYTHON_ONLY_STEPS]
    assert "arm_storage_fault" in kinds
    assert [k for k in kinds if "Python-only" not in (STEP_SHAPES[k].doc or "")] == []


def test_the_agentsim_run_notes_what_each_call_and_request_answered() -> None:
    """idle-eviction's two calls answer 1 and 2, at 0 and 5 minutes; deploy-mid-fiber's
    requests answer the default 404 the SDK gives."""
    replies = [
        (r["t"], r["payload"]["step"], r["payload"]["value"])
        for r in _compile("idle-eviction").python.records
        if r["type"] == "harness:reply"
    ]
    assert replies == [(0, 1, 1), (300_000, 3, 2)]
    bodies = [
        r["payload"]["value"]
        for r in _compile("deploy-mid-fiber-resumes-from-stash").python.records
        if r["type"] == "harness:reply" and isinstance(r["payload"]["value"], dict)
    ]
    assert bodies == [{"status": 404, "body": "Not implemented"}] * 2
