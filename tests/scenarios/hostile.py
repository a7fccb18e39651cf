"""Hypothesis strategies for scenario files that are valid, or nearly, but hostile: durations at
the ends of their ranges, 1 ms heartbeats, counts in the billions, faults that strike every
statement, arguments nested as deep as the reader allows. What a run of such a file may do is
fail, or be stopped by a budget; never hang, never end in a traceback.

`hostile_files()` draws the text of one file; `run_hostile(text, tmp_path)` runs it through
`agentsim run` in this process, under small budgets and a watchdog, and returns the exit code
and the output. The default suite draws a few dozen (tests/scenarios/test_hostile_runs.py); the
benchmark job draws 10,000 (tests/bench/test_hostile_runs.py).
"""

from __future__ import annotations

import contextlib
import io
import signal
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from scenarios.cli import main
from scenarios.language.yaml_lines import MAX_DEPTH

__all__ = ["HANG_S", "hostile_files", "run_hostile"]

HANG_S = 60
"""A run that has not ended after this many seconds of wall clock is a hang (the wall-clock
budget is far lower: this only catches what no budget sees, a loop inside one event)."""
BUDGET_FLAGS = ["--max-events", "20000", "--max-records", "20000", "--max-wall-clock", "20s"]

DAY_MS = 86_400_000
MAX_MS = 366 * DAY_MS


def _ms(low: int = 0) -> st.SearchStrategy[int]:
    """A duration in ms, weighted towards the extremes."""
    return st.one_of(
        st.sampled_from([low, low + 1, 2, 1_000, 60_000, MAX_MS - 1, MAX_MS]).filter(
            lambda ms: ms >= low
        ),
        st.integers(low, MAX_MS),
    )


def _duration(low: int = 0) -> st.SearchStrategy[Any]:
    """The same, written as whole ms or with units."""
    return _ms(low).flatmap(lambda ms: st.sampled_from([ms, f"{ms}ms"]))


HUGE = st.one_of(st.sampled_from([0, 1, 2**31, 2**53, 2**63 - 1]), st.integers(0, 2**63 - 1))


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


ARGS = st.one_of(
    st.just([]),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2),
    st.integers(1, MAX_DEPTH - 8).map(lambda depth: [_nested(depth)]),
    st.just([["x"] * 1000]),
)


@st.composite
def _agents(draw: st.DrawFn) -> dict[str, Any]:
    agents: dict[str, Any] = {
        "counter": {
            "class": "scenarios.workloads:Counter",
            "options": draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "step_ms": st.one_of(st.just(0), _ms()),
                        "alarm_work_ms": _ms(),
                        "keep_alive_interval_ms": _ms(1),
                        "hung_schedule_timeout_seconds": st.integers(1, MAX_MS // 1000),
                        "max_alarm_memory_limit_strikes": st.integers(1, 1000),
                        "retry": st.fixed_dictionaries(
                            {
                                "max_attempts": st.integers(1, 1000),
                                "base_delay_ms": st.integers(1, 10),
                                "max_delay_ms": st.integers(10, MAX_MS),
                            }
                        ),
                    },
                )
            ),
        }
    }
    if draw(st.booleans()):
        # A third of the workers are the classic runaway: a heartbeat of a few ms beside a
        # step of days, which only a budget ends.
        runaway = draw(st.integers(0, 2)) == 0
        steps = draw(st.integers(1, 100_000))
        agents["worker"] = {
            "workload": "fibers",
            "keep_alive_interval": draw(st.integers(1, 5) if runaway else _duration(1)),
            "recovery": draw(st.sampled_from(["resume", "drop", "throw"])),
            "fibers": [
                {
                    "name": "f",
                    "steps": steps,
                    "step": draw(st.integers(DAY_MS, MAX_MS) if runaway else _duration()),
                    "managed": draw(st.booleans()),
                    "fail_at": draw(st.integers(1, steps)),
                }
            ],
        }
    if draw(st.booleans()):
        agents["parent"] = {
            "workload": "tools",
            "runs": [
                {
                    "run_id": "r1",
                    "detached": draw(
                        st.one_of(
                            st.booleans(),
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "max_budget": _duration(),
                                    "no_progress_budget": _duration(),
                                },
                            ),
                        )
                    ),
                    "steps": draw(
                        st.lists(
                            st.one_of(
                                st.builds(lambda d: {"sleep": d}, _duration()),
                                st.just({"hang": True}),
                                st.just({"text": "x" * 10_000}),
                                st.just({"finish": "completed"}),
                            ),
                            max_size=4,
                        )
                    ),
                }
            ],
        }
    if draw(st.booleans()):
        agents["chat"] = {
            "workload": "chat",
            "model": {
                "reply": "hi",
                "chunks": draw(st.integers(1, 10_000)),
                "chunk_delay": draw(_duration()),
            },
        }
    return agents


def _steps(agents: dict[str, Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    names = sorted(agents)
    counter_calls = st.one_of(
        st.just({"call": {"agent": "counter", "method": "increment"}}),
        st.builds(
            lambda n: {"call": {"agent": "counter", "method": "work", "args": [n]}},
            st.one_of(st.just(10**9), st.integers(0, 10**9)),
        ),
        st.builds(
            lambda ms: {"call": {"agent": "counter", "method": "arm", "args": [ms]}},
            st.integers(-MAX_MS, MAX_MS),
        ),
        st.builds(
            lambda args: {"call": {"agent": "counter", "method": "fail", "args": args[:1]}},
            ARGS,
        ),
        st.just({"call": {"agent": "counter", "method": "fail", "args": ["\x07\x1b[31mred"]}}),
    )
    others = []
    if "worker" in agents:
        others.append(st.just({"call": {"agent": "worker", "method": "status"}}))
    if "parent" in agents:
        others.append(st.just({"call": {"agent": "parent", "method": "dispatch", "wait": False}}))
    if "chat" in agents:
        others.append(st.just({"call": {"agent": "chat", "method": "say", "args": ["hi"]}}))
    step = st.one_of(
        counter_calls,
        *others,
        st.builds(lambda d: {"run_for": d}, _duration()),
        st.builds(lambda a: {"evict": {"agent": a}}, st.sampled_from(names)),
        st.just({"deploy_all": {}}),
        st.just({"run_to_next_alarm": {}}),
        st.builds(lambda d: {"quiesce": {"limit": d}}, _duration()),
        st.builds(
            lambda a, kind, match, skip, count: {
                "arm_storage_fault": {
                    "agent": a,
                    "kind": kind,
                    "match": match,
                    "skip": skip,
                    "count": count,
                }
            },
            st.sampled_from(names),
            st.sampled_from(["error", "crash", "crash-after-commit"]),
            st.sampled_from(["^(\\w+\\s?)*$", "(a*)*b", ".*", "^INSERT", "x{1000}"]),
            HUGE,
            st.integers(1, 2**63 - 1),
        ),
        st.builds(lambda d: {"stall_model": {"for": d}}, _duration()),
        st.builds(lambda n: {"fail_model": {"message": "boom", "times": n}}, st.integers(1, 10**9)),
    )
    return st.lists(step, min_size=1, max_size=6)


@st.composite
def hostile_files(draw: st.DrawFn) -> str:
    """The text of one hostile scenario file."""
    agents = draw(_agents())
    document: dict[str, Any] = {
        "name": "hostile",
        "description": "Valid, and as hostile as the format allows.",
        "seed": draw(HUGE),
        "faults": draw(
            st.one_of(
                st.sampled_from(["none", "platform", "flaky-storage", "hostile"]),
                st.fixed_dictionaries(
                    {
                        "deploys_per_day": st.just([1000, 1000]),
                        "storage_error_rate": st.sampled_from([0, 0.5, 1]),
                        "crash_rate": st.sampled_from([0, 0.5, 1]),
                    }
                ),
            )
        ),
        "agents": agents,
        "steps": draw(_steps(agents)),
        "liveness": {"limit": draw(_duration()), "settles": draw(st.booleans())},
        "expect": draw(
            st.lists(
                st.sampled_from(
                    [
                        {"invariants": "all"},
                        {"event": "alarm:*", "count": {"at_most": 2**63 - 1}},
                        {"event": "rpc", "count": {"exactly": 2**62}},
                        {"query": {"agent": "counter", "sql": "SELECT 1 AS one", "rows": []}},
                        {"state": {"agent": "counter", "equals": _nested(20)}},
                    ]
                ),
                max_size=3,
            )
        ),
    }
    if draw(st.booleans()):
        document["interleave"] = {"seed": draw(HUGE), "depth": draw(st.integers(1, 1000))}
    if draw(st.booleans()):
        document["limits"] = {
            "events": draw(st.integers(1, 20_000)),
            "records": draw(st.integers(1, 20_000)),
        }
    if draw(st.sampled_from([*[False] * 19, True])):  # (Hypothesis favours the first choices)
        # One file in twenty crosses a line validate must hold: exit 2, one line per error.
        mistake = draw(st.integers(0, 2))
        if mistake == 0:
            document["agents"]["counter"]["options"]["keep_alive_interval_ms"] = 0
        elif mistake == 1:
            query = {"agent": "counter", "sql": "DELETE FROM counts", "rows": []}
            document["expect"].append({"query": query})
        else:
            fault = {"agent": "counter", "kind": "error", "match": "(?=INSERT)"}
            document["steps"].append({"arm_storage_fault": fault})
    return yaml.safe_dump(document, sort_keys=False, width=100, allow_unicode=False)


class Hang(BaseException):  # noqa: N818 - what the watchdog reports
    """A run went on past `HANG_S` seconds."""


def _watchdog(signum: int, frame: Any) -> None:
    raise Hang(f"the run did not end within {HANG_S} s")


def run_hostile(text: str, tmp_path: Path) -> tuple[int, str, str]:
    """`agentsim run` over `text` in this process: (exit code, stdout, stderr). An exception
    out of `main` (a traceback) or `Hang` propagates to the test."""
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _watchdog)
    signal.alarm(HANG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["run", str(path), "--failures", str(tmp_path / "failures"), *BUDGET_FLAGS])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()
