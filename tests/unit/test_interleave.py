"""Same-instant interleavings: groups of timers counted, reordered by a seed at the points named,
FIFO everywhere else."""

from __future__ import annotations

import pytest

from agents_core import Agent
from sim import Simulation
from sim.interleave import Interleave, InterleavingEnvironment, draw_points, permutation


class Racers(Agent):
    """Three sleepers due at the same instant, twice; each says when it woke and then, one
    continuation later, that it went on."""

    async def race(self) -> None:
        async def sleeper(name: str) -> None:
            for lap in (1, 2):
                await self.host.clock.sleep(1_000)
                self.host.trace.emit("user:woke", name=name, lap=lap)
                gate = self.host.tasks.deferred()
                gate.resolve(None)
                await gate
                self.host.trace.emit("user:went_on", name=name, lap=lap)

        for name in ("a", "b", "c"):
            self.host.tasks.wait_until(sleeper(name))


def _run(interleave: Interleave | None) -> tuple[Simulation, list[tuple[str, str, int]]]:
    sim = Simulation(seed=5, interleave=interleave)
    sim.call(sim.agent(Racers, "r"), "race")
    sim.run_for(5_000)
    records = [
        (record.event, record.get("name"), record.get("lap"))
        for record in sim.trace
        if record.event in ("user:woke", "user:went_on")
    ]
    return sim, records


FIFO = [
    ("user:woke", "a", 1),
    ("user:woke", "b", 1),
    ("user:woke", "c", 1),
    ("user:went_on", "a", 1),
    ("user:went_on", "b", 1),
    ("user:went_on", "c", 1),
    ("user:woke", "a", 2),
    ("user:woke", "b", 2),
    ("user:woke", "c", 2),
    ("user:went_on", "a", 2),
    ("user:went_on", "b", 2),
    ("user:went_on", "c", 2),
]


def _woke(records: list[tuple[str, str, int]], lap: int) -> list[str]:
    return [name for event, name, at in records if event == "user:woke" and at == lap]


def test_without_a_setting_the_kernel_is_plain_simpy_and_fifo() -> None:
    """No interleave setting: the plain environment, and timers due together run FIFO."""
    sim, records = _run(None)
    assert type(sim.platform.kernel.env).__name__ == "Environment"
    assert records == FIFO
    assert sim.group_sizes == ()


def test_counting_groups_changes_nothing() -> None:
    """An interleaving without points counts the groups and keeps FIFO order, digest and all."""
    plain, _ = _run(None)
    counted, records = _run(Interleave(9, ()))
    assert isinstance(counted.platform.kernel.env, InterleavingEnvironment)
    assert records == FIFO
    assert counted.group_sizes == (3, 3)
    assert counted.digest() == plain.digest()
    assert counted.reorderings == []


def test_a_point_reorders_its_group_by_the_seed_and_leaves_the_rest_fifo() -> None:
    """Group 2 runs in the seed's permutation; group 1 and every continuation stay FIFO."""
    sim, records = _run(Interleave(7, (2,)))
    order = [["a", "b", "c"][i] for i in permutation(7, 2, 3)]
    assert order != ["a", "b", "c"]
    assert _woke(records, 1) == ["a", "b", "c"]
    assert _woke(records, 2) == order
    # The continuations scheduled at the instant follow in the order their timers ran.
    assert [name for event, name, lap in records if event == "user:went_on" and lap == 2] == order
    (reordering,) = sim.reorderings
    assert (reordering.t_ms, reordering.group) == (2_000, 2)
    assert len(reordering.before) == len(reordering.after) == 3
    assert reordering.before[0].startswith("Racers/r#1 sleeper (test_interleave.py:")
    assert sorted(reordering.before) == sorted(reordering.after)


def test_same_seed_same_order_and_the_seed_matters() -> None:
    """The order is a function of the seed: the same seed twice gives the same trace, and
    some other seed gives another order."""
    first, records = _run(Interleave(3, (1,)))
    second, again = _run(Interleave(3, (1,)))
    assert records == again and first.digest() == second.digest()
    orders = {tuple(_woke(_run(Interleave(seed, (1,)))[1], 1)) for seed in range(1, 12)}
    assert len(orders) > 1
    assert ("a", "b", "c") not in orders


def test_permutations_are_never_fifo_and_draws_are_points_in_range() -> None:
    """A reordered group never keeps its FIFO order; drawn points are distinct, sorted, in range,
    and all of them when there are fewer groups than the depth."""
    for seed in range(50):
        for size in (2, 3, 5):
            order = permutation(seed, 4, size)
            assert sorted(order) == list(range(size)) and order != list(range(size))
    points = draw_points(11, 3, 40)
    assert len(points) == 3 and list(points) == sorted(set(points))
    assert all(1 <= point <= 40 for point in points)
    assert draw_points(11, 3, 40) == points
    assert draw_points(11, 5, 2) == (1, 2)
    assert draw_points(11, 2, 0) == ()


def test_a_bad_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="group numbers >= 1"):
        Interleave(1, (0,))
    with pytest.raises(ValueError, match="seed must be a whole number"):
        Interleave(-1, (1,))
    assert Interleave(4, (11, 3, 3)).describe() == "{seed: 4, points: [3, 11]}"
