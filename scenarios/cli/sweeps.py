"""Sweeps: the runs of `agentsim run` spread over a local process pool or a Dask cluster.

A run is a pure function of the scenario file's text, the seed, the invariants and the budgets
(`scenarios.run.runner`), so it can run anywhere and give the same verdict and trace digest. A sweep
cuts the runs into tasks (one scenario, a handful of consecutive seeds), sends each task the
file's *text* with its path (a worker needs no copy of the file, only `pip install agentsim`
and the modules its `class:` agents name), and hands the results back **in the order the runs
were given**, whatever order they finished in: the caller prints, writes failure files and sums
up exactly as for a serial run, so the output of `--workers 4` is the output of `--workers 1`.
Results still stream: each is handed back as soon as every run before it is in. At most a few
tasks per worker are in flight at once, so a sweep of 10^6 seeds holds little in memory.

Two backends: `concurrent.futures.ProcessPoolExecutor` (`--workers N`), and Dask's distributed
scheduler (`--dask ADDRESS`, or `--dask local` for a `LocalCluster` on this machine). Both run a
task whose worker died again: Dask on another worker (its `distributed.scheduler.allowed-failures`
setting says how often), the local pool on a fresh pool, since a dead worker breaks the whole
pool; a task that was running each time `ALLOWED_DEATHS` + 1 pools broke ends the sweep with
`SweepFailed` naming its seeds. Dask is the optional extra `agentsim[dask]` and is imported only
when asked for.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios.cli.inputs import positive
from scenarios.language.loader import load_scenario, parse_scenario
from scenarios.language.schema import Scenario
from scenarios.run.determinism import run_checked
from scenarios.run.runner import ScenarioResult, budget_overrides, run_scenario
from sim.trace import Trace, TraceRecord

__all__ = [
    "SweepFailed",
    "SweepInputError",
    "SweepSettings",
    "add_sweep_flags",
    "run_task",
    "sweep",
]

TASKS_PER_WORKER = 4
"""Tasks in flight per worker: enough to keep every worker busy while results come back."""
MAX_SEEDS_PER_TASK = 32
"""A task runs at most this many seeds (fewer when there are few runs per worker)."""
ALLOWED_DEATHS = 3
"""Broken local pools a task may be in before the sweep stops (Dask's default allowance)."""


class SweepInputError(ValueError):
    """A run that could not start for a reason the command line gave (a determinism check that
    cannot be made, say): bad input, as in a serial run."""


class SweepFailed(RuntimeError):
    """The sweep could not finish: a worker process died, or the cluster gave a task up."""


@dataclass(frozen=True)
class SweepSettings:
    """What every run of a sweep is checked with, as the command line said it."""

    invariants: tuple[str, ...] = ()
    check_determinism: bool = False
    in_subprocess: bool = False
    budgets: tuple[tuple[str, int | float], ...] = ()
    """`budget_overrides` arguments (the `--max-*` flags) every run takes."""
    keep_records: bool = False
    """Ship each run's trace records back (for `--trace`, `--html`, `--junit`); otherwise a
    result's `trace` is empty and only its digest and event count say what it was."""
    sdk: str | None = None
    """The release every run starts on (`--sdk`; None: each file's own)."""


@dataclass(frozen=True)
class _Task:
    first: int
    """The position of its first run among all the runs given."""
    path: str
    text: str
    seeds: tuple[int | None, ...]
    settings: SweepSettings
    cwd: str = ""
    """Where the command runs: a worker on this machine runs there too, so that relative paths
    (the file, the modules next to it) mean what they mean to the command."""


def add_sweep_flags(parser: argparse.ArgumentParser) -> None:
    """`--workers N` and `--dask ADDRESS` on `agentsim run`."""
    parser.add_argument(
        "--workers",
        type=positive,
        default=1,
        metavar="N",
        help="run the scenarios and seeds on N local processes (results and output are those "
        "of one process)",
    )
    parser.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="send the runs to the Dask scheduler at ADDRESS (tcp://host:8786), or 'local' to "
        "start a LocalCluster of --workers processes; needs pip install 'agentsim[dask]'",
    )


# -- what a worker runs -------------------------------------------------------------------------
def execute(scenario: Scenario, seed: int | None, settings: SweepSettings) -> ScenarioResult:
    """One run, as `agentsim run` makes it (with the determinism check when asked)."""
    if settings.check_determinism or settings.in_subprocess:
        try:
            return run_checked(
                scenario,
                seed,
                invariants=settings.invariants,
                in_subprocess=settings.in_subprocess,
            )
        except (ValueError, RuntimeError) as exc:
            raise SweepInputError(str(exc)) from None
    return run_scenario(scenario, seed, invariants=settings.invariants)


def run_task(task: _Task) -> list[_Shipped]:
    """The runs of one task, in seed order, each made light enough to send back."""
    if task.cwd and os.path.isdir(task.cwd):
        os.chdir(task.cwd)
    with budget_overrides(**dict(task.settings.budgets)):
        scenario = _scenario(task.path, task.text).on_release(task.settings.sdk)
        return [
            _Shipped.of(execute(scenario, seed, task.settings), task.settings.keep_records)
            for seed in task.seeds
        ]


@dataclass(frozen=True)
class _Shipped:
    """A result as it travels between processes: the verdict without its `Trace` (an object
    with caches and observers), and the trace's records only when the caller writes them."""

    result: ScenarioResult
    records: tuple[TraceRecord, ...]

    @classmethod
    def of(cls, result: ScenarioResult, keep_records: bool) -> _Shipped:
        records = tuple(result.trace.records) if keep_records else ()
        # No `Trace` travels (it holds a running hash): `landed` builds a fresh one.
        # trace=None only in transit: `landed` gives the result a fresh Trace before any use.
        bare = dataclasses.replace(result, trace=None, statements=(), reorderings=())  # type: ignore[arg-type]
        return cls(bare, records)

    def landed(self) -> ScenarioResult:
        """The result again, with a trace holding the records shipped (none when not asked)."""
        trace = Trace()
        for record in self.records:
            trace.append(record.t_ms, record.agent, record.inc, record.event, record.fields)
        return dataclasses.replace(self.result, trace=trace)


def _scenario(path: str, text: str) -> Scenario:
    """The file itself when this machine has it unchanged (loading it the way `agentsim run`
    does), else the text sent along, under the same path (what failures and replays name)."""
    try:
        same = Path(path).read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        same = False
    return load_scenario(path) if same else parse_scenario(text, path)


# -- cutting runs into tasks --------------------------------------------------------------------
def _tasks(
    runs: Sequence[tuple[Scenario, int | None]], settings: SweepSettings, workers: int
) -> Iterator[_Task]:
    size = max(1, min(MAX_SEEDS_PER_TASK, len(runs) // (workers * TASKS_PER_WORKER)))
    texts: dict[str, str] = {}
    index = 0
    while index < len(runs):
        scenario = runs[index][0]
        seeds: list[int | None] = []
        first = index
        while index < len(runs) and runs[index][0] is scenario and len(seeds) < size:
            seeds.append(runs[index][1])
            index += 1
        if scenario.path not in texts:
            texts[scenario.path] = _text_of(scenario)
        yield _Task(first, scenario.path, texts[scenario.path], tuple(seeds), settings, os.getcwd())


def _text_of(scenario: Scenario) -> str:
    try:
        return Path(scenario.path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepInputError(
            f"{scenario.path}: cannot read the file to send it to the workers: {exc}"
        ) from None


# -- the sweep ----------------------------------------------------------------------------------
def sweep(
    runs: Sequence[tuple[Scenario, int | None]],
    settings: SweepSettings,
    *,
    workers: int = 1,
    dask: str | None = None,
) -> Iterator[ScenarioResult]:
    """The result of every run of `runs`, in their order, computed on `workers` local processes
    or on the Dask scheduler at `dask` ('local': a LocalCluster of `workers` processes)."""
    if dask is not None:
        backend: _Backend = _DaskBackend(dask, workers)
    else:
        backend = _PoolBackend(workers)
    with backend:
        tasks = _tasks(runs, settings, backend.workers)
        ready: dict[int, list[ScenarioResult]] = {}
        next_run = 0
        for task, shipped in backend.completed(tasks):
            ready[task.first] = [item.landed() for item in shipped]
            while next_run in ready:
                batch = ready.pop(next_run)
                next_run += len(batch)
                yield from batch


class _Backend:
    workers: int

    def __enter__(self) -> _Backend:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(interrupted=kind is not None)

    def close(self, interrupted: bool = False) -> None:
        raise NotImplementedError

    def completed(self, tasks: Iterable[_Task]) -> Iterator[tuple[_Task, list[_Shipped]]]:
        raise NotImplementedError


def _windowed(
    tasks: Iterable[_Task],
    window: int,
    submit: Callable[[_Task], Any],
    next_done: Callable[[], tuple[Any, _Task]],
) -> Iterator[tuple[Any, _Task]]:
    """Keep at most `window` tasks submitted; yield each finished (future, task)."""
    source = iter(tasks)
    in_flight = 0
    for task in source:
        submit(task)
        in_flight += 1
        if in_flight >= window:
            break
    while in_flight:
        future, task = next_done()
        in_flight -= 1
        for more in source:
            submit(more)
            in_flight += 1
            break
        yield future, task


class _PoolBackend(_Backend):
    def __init__(self, workers: int) -> None:
        self.workers = workers
        # forkserver: workers fork from a clean server process, never from a parent that may
        # hold threads (a progress bar, a test runner) mid-lock.
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods else None)
        if "forkserver" in methods:
            context.set_forkserver_preload(["scenarios.cli.sweeps"])
        self.context = context
        self.pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=self.context,
            initializer=_leave_interrupts_to_the_parent,
        )

    def close(self, interrupted: bool = False) -> None:
        # After an error or Ctrl-C, do not wait for the runs still going: their results are
        # not wanted any more. The workers ignore SIGINT (the command owns it), so each would
        # finish its task before the interpreter's exit joins it: they are stopped instead.
        workers = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=not interrupted, cancel_futures=True)
        if interrupted:
            for process in workers:
                with contextlib.suppress(Exception):
                    process.terminate()
            for process in workers:
                with contextlib.suppress(Exception):
                    process.join(5)

    def completed(self, tasks: Iterable[_Task]) -> Iterator[tuple[_Task, list[_Shipped]]]:
        source = iter(tasks)
        pending: dict[Future[list[_Shipped]], _Task] = {}
        again: list[_Task] = []  # tasks a dead worker took down with its pool, run first
        deaths: dict[int, int] = {}  # a task (by its first run) -> pools broken while it ran
        window = self.workers * TASKS_PER_WORKER
        while True:
            while len(pending) < window:
                task = again.pop(0) if again else next(source, None)
                if task is None:
                    break
                try:
                    pending[self.pool.submit(run_task, task)] = task
                except BrokenProcessPool:
                    again = self._renew(pending, deaths, [task, *again])
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = {f for f in done if isinstance(f.exception(), BrokenProcessPool)}
            for future in sorted(done - broken, key=lambda f: pending[f].first):
                yield pending.pop(future), future.result()
            if broken:  # the pool is gone, and every task still in it with it
                again = self._renew(pending, deaths, again)

    def _renew(
        self,
        pending: dict[Future[list[_Shipped]], _Task],
        deaths: dict[int, int],
        waiting: list[_Task],
    ) -> list[_Task]:
        """A fresh pool after a broken one. Each task that was in it (`pending`, emptied here)
        counts one death, and one that was in `ALLOWED_DEATHS` + 1 broken pools ends the sweep
        (it is the likeliest to kill its worker); tasks only `waiting` to be submitted count
        none. Returns both, in the order of their first run, to be submitted first."""
        lost = list(pending.values())
        pending.clear()
        for task in lost:
            deaths[task.first] = deaths.get(task.first, 0) + 1
        if lost:
            worst = max(lost, key=lambda task: (deaths[task.first], -task.first))
            if deaths[worst.first] > ALLOWED_DEATHS:
                raise SweepFailed(_died(worst, deaths[worst.first]))
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = self._new_pool()
        return sorted([*lost, *waiting], key=lambda task: task.first)


def _died(task: _Task, times: int) -> str:
    return (
        f"a worker process died {times} times while running {task.path} (seeds "
        f"{_seeds_text(task.seeds)} or a task beside them); run those seeds alone to see why"
    )


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Processes started inside ignore Ctrl-C for good (an ignored signal stays ignored across
    exec, and Python then installs no handler): the local cluster's nannies and workers leave
    it to the command, which closes the cluster."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _leave_interrupts_to_the_parent() -> None:
    # Ctrl-C reaches every process of the terminal's group: the workers ignore it, and the
    # command stops the pool and says "interrupted" once (a worker killed by it would break the
    # pool and look like a crash).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _DaskBackend(_Backend):
    def __init__(self, address: str, workers: int) -> None:
        try:
            import distributed
        except ModuleNotFoundError:
            raise SweepInputError(
                "--dask needs Dask's distributed scheduler, which is not installed; install it "
                "with pip install 'agentsim[dask]'"
            ) from None
        self.distributed = distributed
        self.cluster = None
        try:
            if address == "local":
                with _interrupts_ignored():
                    self.cluster = distributed.LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.ERROR,
                    )
                self.client = distributed.Client(self.cluster)
            else:
                self.client = distributed.Client(address, timeout="30s")
        except OSError as exc:
            self.close()
            raise SweepInputError(f"--dask {address}: cannot reach the scheduler: {exc}") from None
        self.workers = max(1, sum(self.client.nthreads().values()))

    def close(self, interrupted: bool = False) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()

    def completed(self, tasks: Iterable[_Task]) -> Iterator[tuple[_Task, list[_Shipped]]]:
        distributed = self.distributed
        finished = distributed.as_completed()
        owner: dict[Any, _Task] = {}

        def submit(task: _Task) -> None:
            future = self.client.submit(run_task, task, pure=False)
            owner[future.key] = task
            finished.add(future)

        def next_done() -> tuple[Any, _Task]:
            future = next(finished)
            return future, owner.pop(future.key)

        window = self.workers * TASKS_PER_WORKER
        for future, task in _windowed(tasks, window, submit, next_done):
            try:
                results = future.result()
            except SweepInputError:
                raise
            except distributed.KilledWorker as exc:
                raise SweepFailed(
                    f"the Dask scheduler gave up {task.path} (seeds {_seeds_text(task.seeds)}): "
                    f"the workers running it died too often ({exc})"
                ) from None
            yield task, results


def _seeds_text(seeds: Sequence[int | None]) -> str:
    shown = [str(seed) if seed is not None else "the file's" for seed in seeds]
    return shown[0] if len(shown) == 1 else f"{shown[0]}..{shown[-1]}"
