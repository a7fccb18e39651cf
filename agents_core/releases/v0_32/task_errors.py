"""What the Tasks capability of 0.32.0 raises (spec sdk-0.32 §6.5): the errors an author sees,
each with the stable `error_name` a failed run's row keeps, and the two signals that end an
attempt without failing it.

Errors (subclasses of `Exception`): `NonRetryableError` (raised by a step callback: the step
fails at once, whatever its retry budget; any error whose name is `NonRetryableError` counts),
`DuplicateTaskStepError`, `TaskReplayDivergedError`, `MissingTaskDefinitionError`,
`TaskSerializationError`, `TaskMemoryLimitSealed` (what a run the memory-limit breaker sealed
fails with; never raised), and two the engine uses inside an attempt: `AttemptSuperseded` (another
attempt holds the run) and `TaskStepFailed` (a step journaled `failed`, raised again on replay).

Signals (subclasses of `BaseException`, so that a handler's `except Exception` around
unrelated work cannot swallow them, as the SDK's are not `Error`s): `TaskSuspension` (the run
waits until a sleep's or a retry's wake time) and `TaskCancellation` (a step boundary saw the
run's cancellation request, or a running step was aborted by it).
"""

from __future__ import annotations

__all__ = [
    "AttemptSuperseded",
    "DuplicateTaskStepError",
    "MissingTaskDefinitionError",
    "NonRetryableError",
    "TaskCancellation",
    "TaskMemoryLimitSealed",
    "TaskReplayDivergedError",
    "TaskSerializationError",
    "TaskStepFailed",
    "TaskSuspension",
    "is_non_retryable",
]


class _NamedError(Exception):
    """An error whose `error_name` is its class name (what a failed run's row keeps)."""

    @property
    def error_name(self) -> str:
        return type(self).__name__


class NonRetryableError(_NamedError):
    """Raised by a step callback to fail its step (and so its run) at once, skipping the
    retries left."""


def is_non_retryable(error: BaseException) -> bool:
    """A `NonRetryableError`, or any error that names itself so (the SDK honours the name)."""
    return isinstance(error, NonRetryableError) or (
        getattr(error, "error_name", None) == "NonRetryableError"
    )


class DuplicateTaskStepError(_NamedError):
    """One replay used a step name twice: step names are the journal's keys."""

    def __init__(self, step_name: str) -> None:
        super().__init__(
            f'Step name "{step_name}" was already used in this run: step names are durable '
            f'journal keys; give a loop\'s steps a stable index, e.g. "{step_name}:0".'
        )
        self.step_name = step_name


class TaskReplayDivergedError(_NamedError):
    """The journal holds what this handler cannot have written (a step of another kind)."""

    def __init__(self, step_name: str, detail: str) -> None:
        super().__init__(
            f'Replay diverged from the journal at step "{step_name}": {detail}; version the '
            'definition name (e.g. "name@v2") rather than change the steps of runs in flight.'
        )
        self.step_name = step_name


class MissingTaskDefinitionError(_NamedError):
    """A live run's definition is no longer declared (a deployment removed or renamed it)."""

    def __init__(self, definition: str) -> None:
        super().__init__(
            f'No Task definition named "{definition}" is declared, but a run of it is live: '
            "declare it again (or a successor under the same name) to let the run finish."
        )
        self.definition = definition


class TaskMemoryLimitSealed(_NamedError):
    """The alarm memory-limit breaker sealed at its strike limit while this run's wake (or
    work it handed off) was what struck: the run fails with this error (spec sdk-0.32 §2.5)."""

    def __init__(self) -> None:
        super().__init__(
            "This run's alarms hit the Durable Object memory limit on consecutive attempts and "
            "the alarm memory-limit breaker sealed them (#1825); start a new run to try again."
        )


class TaskSerializationError(_NamedError):
    """A Task value (input, metadata, step result, result) that is not JSON or is too big."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"Cannot serialize {what}: {detail}")


class AttemptSuperseded(Exception):  # noqa: N818 - the SDK's AttemptSupersededError
    """Another attempt claimed the run: this one unwinds without settling anything."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f'Task attempt superseded: run "{run_id}" is no longer claimed by this execution '
            "attempt"
        )


class TaskStepFailed(Exception):  # noqa: N818 - a journaled step error, raised again
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = name


class TaskSuspension(BaseException):
    """The attempt ends here and the run waits until `wake_at` (a sleep or a step's retry)."""

    def __init__(self, wake_at: int, reason: str) -> None:
        super().__init__(f"Task run suspended until {wake_at} ({reason})")
        self.wake_at = wake_at
        self.reason = reason


class TaskCancellation(BaseException):
    """The run's cancellation request reached this attempt: the run settles `cancelled`."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(f"Task run cancelled ({reason})" if reason else "Task run cancelled")
        self.reason = reason
