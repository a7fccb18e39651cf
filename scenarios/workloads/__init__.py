"""Built-in workload agents: what scenario files run without a line of Python.

`Counter` is named by import path (`class: "scenarios.workloads:Counter"`). The others are
described in YAML (`workload: fibers | tools | chat | schedules`) and built by the loader into
a subclass carrying the description as class attributes; tests can build the same classes with
`fiber_workload`, `tools_workload`, `chat_workload` and `schedule_workload`.

| workload | module | what it does |
| --- | --- | --- |
| `fibers` | `fibers.py` | fibers of N sleeping steps that stash, fail and are recovered |
| `tools` | `tools.py`, `children.py` | agent-tool runs of scripted or chat children |
| `chat` | `chat.py` | a chat host answering `say` from a scripted model |
| `schedules` | `schedules.py` | interval, cron and one-shot schedules that work, fail, stop |

Every workload follows the trace conventions of `docs/scenario-language.md`: `workload:*`
records for what the workload did that the runtime does not trace itself.
"""

from scenarios.workloads.chat import AiChatWorkload, ThinkWorkload, chat_workload
from scenarios.workloads.children import ChatToolChild, ScriptedToolChild, ThinkToolChild
from scenarios.workloads.counter import Counter
from scenarios.workloads.fibers import FiberPlan, FiberWorkload, fiber_workload
from scenarios.workloads.schedules import SchedulePlan, ScheduleWorkload, schedule_workload
from scenarios.workloads.tools import (
    AiChatToolsWorkload,
    DetachedPlan,
    RunPlan,
    ThinkToolsWorkload,
    ToolsWorkload,
    tools_workload,
)

__all__ = [
    "AiChatToolsWorkload",
    "AiChatWorkload",
    "ChatToolChild",
    "Counter",
    "DetachedPlan",
    "FiberPlan",
    "FiberWorkload",
    "RunPlan",
    "SchedulePlan",
    "ScheduleWorkload",
    "ScriptedToolChild",
    "ThinkToolChild",
    "ThinkToolsWorkload",
    "ThinkWorkload",
    "ToolsWorkload",
    "chat_workload",
    "fiber_workload",
    "schedule_workload",
    "tools_workload",
]
