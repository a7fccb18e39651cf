"""Seeded randomness: one seed per run, forked into named streams.

Each stream (`eviction`, `deploy`, `latency`, `faults`, `ids`, ...) is its own `random.Random`
seeded from a hash of the run seed and the stream name, so adding a stream or drawing more from
one never shifts another. Nothing else in the simulator may be random.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["NANOID_ALPHABET", "Seeds", "Stream"]

NANOID_ALPHABET = "useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict"
"""nanoid's URL-safe alphabet (64 symbols), so ids look like the SDK's."""


class Stream:
    """One named, seeded source of randomness."""

    __slots__ = ("name", "_rng")

    def __init__(self, name: str, seed_int: int) -> None:
        self.name = name
        self._rng = random.Random(seed_int)

    def random(self) -> float:
        """A float in [0, 1)."""
        return self._rng.random()

    def int_between(self, low: int, high: int) -> int:
        """An integer in [low, high], both ends included."""
        if low > high:
            raise ValueError(f"int_between needs low <= high, got low={low} high={high}")
        return self._rng.randint(low, high)

    def chance(self, probability: float) -> bool:
        """True with the given probability (0 never draws, so it costs no randomness)."""
        if probability <= 0:
            return False
        return self._rng.random() < probability

    def nanoid(self, size: int = 21) -> str:
        """An id of `size` symbols from nanoid's alphabet."""
        if size < 1:
            raise ValueError(f"nanoid size must be >= 1, got {size}")
        bits = self._rng.getrandbits(6 * size)
        return "".join(NANOID_ALPHABET[(bits >> (6 * i)) & 63] for i in range(size))


class Seeds:
    """The run seed and the streams forked from it (created on first use, by name)."""

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.seed = seed
        self._streams: dict[str, Stream] = {}

    def stream(self, name: str) -> Stream:
        found = self._streams.get(name)
        if found is None:
            digest = hashlib.sha256(f"agentsim:{self.seed}:{name}".encode()).digest()
            found = Stream(name, int.from_bytes(digest[:8], "big"))
            self._streams[name] = found
        return found
