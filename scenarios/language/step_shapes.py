"""The declaration of every step: what each action's value is, for the loader and the schema.

`STEP_SHAPES` maps each action key (`call`, `evict`, `stall_model`, ...) to the value it takes;
`STEP` is a whole step, one action beside an optional `at:` or `after:`.
`scenarios.language.parse_steps` reads steps with these declarations, and
`scenarios.language.json_schema` renders them; what needs the rest of the scenario (aliases,
methods, clients, run ids) only the parser checks.
"""

from __future__ import annotations

import re

from scenarios.language.parse_agents import NAME, NAME_HINT, NAME_PATTERN
from scenarios.language.schema import EVICTION_REASONS
from scenarios.language.shapes import (
    Anything,
    Duration,
    Flag,
    Map,
    OneOf,
    Ref,
    Seq,
    Shape,
    Text,
    Value,
    Whole,
)
from sim.sqlite import FAULT_KINDS

__all__ = ["ERROR_NAME", "HTTP_METHODS", "STEP", "STEP_SHAPES"]

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
ERROR_NAME = re.compile(r"[A-Za-z_]\w*")
"""An exception class name, for `expect_error`."""

AGENT = Text(doc="An agent alias.")
CLIENT = Text(doc="A client name.")
EXPECT_ERROR = OneOf(
    (Flag(), Text(pattern=ERROR_NAME.pattern)),
    doc="false: must succeed; true: must fail; a class name: must fail with it.",
)
MAY_FAIL_WITH = Text(
    pattern=ERROR_NAME.pattern,
    doc="An exception class name: the call may fail with it (a fault can refuse it), or "
    "return (then returns: and status: are checked).",
)
TIMES = Whole(minimum=1, doc="Only the next N model calls (default: every later one).")
NOTHING = Shape({})
STEP_SHAPES: dict[str, Value] = {
    "call": Shape(
        {
            "agent": AGENT,
            "method": Text(doc="A public method of the agent's class."),
            "args": Seq(Anything()),
            "kwargs": Map(),
            "wait": Flag(default=True, doc="Wait for it (false: judged after the run)."),
            "expect_error": EXPECT_ERROR,
            "may_fail_with": MAY_FAIL_WITH,
            "returns": Anything(doc="What it must return, compared as JSON (null: None)."),
        },
        required=("agent", "method"),
        exclusive=(("returns", "expect_error"), ("may_fail_with", "expect_error")),
        doc="An RPC on the agent's stub.",
    ),
    "run_in": Shape(
        {
            "agent": AGENT,
            "function": Text(
                pattern=r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*",
                hint="expected 'package.module:function'",
                doc="A function of one argument, the live agent instance (sync or async).",
            ),
            "expect_error": EXPECT_ERROR,
            "returns": Anything(doc="What it must return, compared as JSON (null: None)."),
        },
        required=("agent", "function"),
        exclusive=(("returns", "expect_error"),),
        doc="Run a function against the agent's live instance (Simulation.run_in).",
    ),
    "request": Shape(
        {
            "agent": AGENT,
            "method": Text(choices=HTTP_METHODS, default="GET"),
            "path": Text(
                default="/", pattern=r"/[\s\S]*", hint="expected a path starting with '/'"
            ),
            "body": Anything(),
            "headers": Map(Text(empty=True)),
            "status": Whole(minimum=100, maximum=599, doc="The status it must answer."),
            "expect_error": EXPECT_ERROR,
            "may_fail_with": MAY_FAIL_WITH,
        },
        required=("agent",),
        exclusive=(("may_fail_with", "expect_error"),),
        doc="An HTTP request to the agent.",
    ),
    "connect": Shape(
        {"client": NAME, "agent": AGENT, "may_fail_with": MAY_FAIL_WITH},
        required=("client",),
        doc="Open a client connection.",
    ),
    "disconnect": Shape(
        {
            "client": CLIENT,
            "code": Whole(minimum=1000, maximum=4999, default=1000),
            "reason": Text(default="client closed"),
        },
        required=("client",),
    ),
    "reconnect": Shape({"client": CLIENT, "may_fail_with": MAY_FAIL_WITH}, required=("client",)),
    "send": Shape({"client": CLIENT, "message": Anything()}, required=("client", "message")),
    "run_for": Duration(doc="Let this much time pass."),
    "run_until": Duration(doc="Run until this absolute sim time."),
    "evict": Shape(
        {
            "agent": Text(doc="An alias, or alias/name/... for a sub-agent."),
            "reason": Text(choices=EVICTION_REASONS, default="explicit"),
            "run_id": Text(pattern=NAME_PATTERN.pattern, hint=NAME_HINT, doc="A sub-agent's name."),
            "child": Text(
                pattern=r"[A-Za-z_]\w*",
                hint="expected the sub-agent's class name, or scripted, think or chat",
                doc="The sub-agent's class (with run_id): a class name, or a child kind.",
            ),
            "if_present": Flag(
                default=False,
                doc="Do nothing when the sub-agent does not exist then (not opened yet, or "
                "deleted) instead of failing the step: a drawn fault.",
            ),
        },
        required=("agent",),
        doc="Kill the agent's (or a sub-agent's) live incarnation now.",
    ),
    "deploy": Shape(
        {"sdk": Text(doc="The SDK release it brings: an upgrade (default: the same code).")},
        doc="Restart every live incarnation; with sdk:, on that newer release.",
    ),
    "deploy_all": Shape(
        {"sdk": Text(doc="The SDK release it brings: an upgrade (default: the same code).")},
        doc="The same as deploy.",
    ),
    "arm_storage_fault": Shape(
        {
            "agent": Text(doc="An alias, or alias/name/... for a sub-agent."),
            "run_id": Text(pattern=NAME_PATTERN.pattern, hint=NAME_HINT, doc="A sub-agent's name."),
            "child": Text(
                pattern=r"[A-Za-z_]\w*",
                hint="expected the sub-agent's class name, or scripted, think or chat",
                doc="The sub-agent's class (with run_id): a class name, or a child kind.",
            ),
            "kind": Text(choices=FAULT_KINDS),
            "match": Text(
                doc="An RE2 pattern the statement (whitespace collapsed) must contain a match of."
            ),
            "skip": Whole(default=0),
            "count": Whole(minimum=1, default=1),
        },
        required=("agent", "kind"),
        doc="Fail or crash a statement of the agent's storage. Python-only: the real SDK's "
        "storage cannot be made to fail, so `agentsim diff` skips a scenario with this step.",
    ),
    "run_to_next_alarm": Shape({}, doc="Advance to the earliest armed alarm and let it fire."),
    "advance_to_next_alarm": Shape({}, doc="The same as run_to_next_alarm."),
    "stall_model": Shape(
        {
            "agent": Text(doc="A chat workload with a model of its own (default: model:)."),
            "for": Duration(doc="How long no chunk comes."),
            "then": Ref("reply", doc="What streams after the stall; without it the call fails."),
            "times": TIMES,
        },
        required=("for",),
        doc="From now on the model stalls. Python-only: the scripted model exists only in "
        "agentsim, so `agentsim diff` skips a scenario with this step.",
    ),
    "fail_model": Shape(
        {
            "agent": Text(doc="A chat workload with a model of its own (default: model:)."),
            "message": Text(),
            "after_chunks": Whole(default=0),
            "in_band": Flag(default=False),
            "partial": Text(empty=True),
            "times": TIMES,
        },
        required=("message",),
        doc="From now on the model fails. Python-only: the scripted model exists only in "
        "agentsim, so `agentsim diff` skips a scenario with this step.",
    ),
    "quiesce": Shape({"limit": Duration(default="1h")}, doc="Faults stop; run until quiet."),
}
"""The value of each action, by its key."""
STEP = OneOf(
    tuple(
        Shape(
            {kind: value, "at": Duration(doc="Absolute sim time."), "after": Duration()},
            required=(kind,),
            exclusive=(("at", "after"),),
        )
        for kind, value in STEP_SHAPES.items()
    ),
    doc="One step: an action, and optionally at: or after:.",
)
