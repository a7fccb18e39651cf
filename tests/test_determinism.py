"""Same seed, same trace digest: in another process and under another PYTHONHASHSEED."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sim import FaultProfile, Simulation

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = """
import sys
from agents_core import Agent
from sim import AgentEvicted, FaultProfile, Simulation

class Busy(Agent):
    initial_state = {"n": 0}
    async def on_start(self):
        self.sql("CREATE TABLE IF NOT EXISTS t (k TEXT, v INTEGER)")
    async def work(self, k):
        for i in range(5):
            self.sql("INSERT INTO t VALUES (?, ?)", k, i)
            self.set_state({"n": self.state["n"] + 1})
            self.host.trace.emit("user:step", k=k, i=i, tags={k, "x", "y"})
            await self.host.clock.sleep(int(self.host.entropy.random() * 40_000))
        self.host.alarm.set_alarm(self.host.clock.now_ms() + 200_000)
    async def alarm(self):
        self.host.trace.emit("user:alarm", id=self.host.entropy.nanoid())

def run(seed):
    sim = Simulation(seed=seed, faults=FaultProfile(deploys_per_day=(1, 2), crash_rate=0.01))
    refs = [sim.agent(Busy, name) for name in ("a", "b", "c")]
    for ref in refs:
        sim.start_call(ref, "work", ref.name)
    try:
        sim.connect(refs[0])
    except AgentEvicted:  # a crash fault may strike the connection's turn
        pass
    sim.run_for(3 * 86_400_000)
    sim.quiesce(limit_ms=86_400_000)
    return sim.digest()

if __name__ == "__main__":
    print(run(int(sys.argv[1])))
"""


def run_in_process(seed: int, hash_seed: str, tmp_path: Path) -> str:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(script), str(seed)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout.strip()


def test_same_seed_same_digest_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    """Two processes with different PYTHONHASHSEED produce the identical digest."""
    first = run_in_process(11, "1", tmp_path)
    second = run_in_process(11, "2024", tmp_path)
    assert len(first) == 64
    assert first == second


def test_a_different_seed_gives_a_different_digest(tmp_path: Path) -> None:
    """The seed matters: another seed, another run."""
    assert run_in_process(11, "0", tmp_path) != run_in_process(12, "0", tmp_path)


def test_same_seed_same_digest_in_process() -> None:
    """Twice in one process, including profile faults: identical digests."""

    def digest() -> str:
        sim = Simulation(seed=5, faults=FaultProfile(deploys_per_day=(1, 2)))
        sim.run_for(5 * 86_400_000)
        return sim.digest()

    assert digest() == digest()
