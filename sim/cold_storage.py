"""Cold storage for idle agents' databases: opening an agent's SQLite connection, cooling it to
bytes and restoring it, and the process's set of parked warm connections (what
`sim.sqlite.FaultyStorage.park` relies on).

An SQLite connection costs far more than its data: an agent's database is about 20 KiB of pages,
its connection about 150 KiB (some 30 prepared statements of 3-4 KiB each, the page cache, the
parsed schema). When an agent's incarnation ends its storage is parked; the `WARM_PARKED` most
recently parked keep their connection, the ones parked before them are cooled: the database
kept as compressed bytes (`serialize`), the connection closed. A cold database is restored into
a new in-memory database page for page, the same byte for byte; only its
statements are prepared again (about 0.25 ms for a wake's startup). Cooled connections free
memory in many small blocks, which the C allocator keeps unless asked: now and then it is asked
to hand free pages back to the system (`malloc_trim`, where the C library has it), at a pace
that keeps that cost in proportion to what was freed.
"""

from __future__ import annotations

import ctypes
import sqlite3
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

__all__ = [
    "PAGE_SIZE",
    "WARM_PARKED",
    "Parkable",
    "close",
    "connect",
    "image_of",
    "park",
    "restore",
    "unpark",
]

PAGE_SIZE = 512
"""SQLite's page size for agents' databases (its default is 4096): an agent's dozen near-empty
tables and their indexes take a page each, and a page in the cache costs its size and about
300 bytes more."""
WARM_PARKED = 128
"""How many parked storages (agents without a live incarnation) keep their connection; the
ones parked before them are cooled. A scenario's or a hunt's few agents, or the standard day's
hundred, never go cold; at thousands of agents, an idle one costs its data, not a connection."""
CONNECTION_BYTES = 150 << 10
"""About what an agent's warm connection holds beyond its data: what cooling one frees."""
TRIM_FLOOR = 4 << 20
"""The fewest bytes cooled connections free before the allocator is asked to give memory back."""


class Parkable(Protocol):
    def _cool(self) -> None: ...


def connect() -> tuple[sqlite3.Connection, sqlite3.Cursor]:
    """An empty agent database: a connection (rows as `sqlite3.Row` for inspection) and the
    cursor agent code's statements share, with plain tuple rows (a cursor per statement and a
    Row per row cost more than the statement)."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    cursor = db.cursor()
    cursor.row_factory = None
    _Memory.warm += 1
    return db, cursor


def image_of(db: sqlite3.Connection, cursor: sqlite3.Cursor) -> bytes:
    """The database as compressed bytes, its connection closed (outside any transaction)."""
    image = zlib.compress(db.serialize(), 1)
    cursor.close()
    db.close()
    _Memory.warm -= 1
    _freed(CONNECTION_BYTES)
    return image


def close(db: sqlite3.Connection, cursor: sqlite3.Cursor) -> None:
    """Close a connection `connect` or `restore` opened (a copy made only to be read)."""
    cursor.close()
    db.close()
    _Memory.warm -= 1


def restore(image: bytes) -> tuple[sqlite3.Connection, sqlite3.Cursor]:
    """A new connection holding the database `image_of` made: copied page for page into an
    in-memory database like the one it came from, so that its pages live in one place (a
    deserialized database would keep the bytes beside its page cache)."""
    db, cursor = connect()
    source = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        source.deserialize(zlib.decompress(image))
        (cookie,) = source.execute("PRAGMA schema_version").fetchone()
        source.backup(db)
    finally:
        source.close()
    # A backup bumps the copy's schema cookie (a header field that tells other connections to
    # read the schema again; there are none): set back, the database is the same byte for byte.
    db.execute(f"PRAGMA schema_version = {int(cookie)}")
    return db, cursor


_PARKED: OrderedDict[int, weakref.ref[Parkable]] = OrderedDict()
"""Parked storages that are still warm, the least recently parked first (one set per process:
memory is the process's)."""


def park(storage: Parkable) -> None:
    """`storage` is parked: the most recently parked; cool the ones beyond `WARM_PARKED`."""
    key = id(storage)
    _PARKED[key] = weakref.ref(storage, lambda _ref: _PARKED.pop(key, None))
    while len(_PARKED) > WARM_PARKED:
        _key, ref = _PARKED.popitem(last=False)
        parked = ref()
        if parked is not None:
            parked._cool()


def unpark(storage: Parkable) -> None:
    _PARKED.pop(id(storage), None)


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc: the allocator keeps what it keeps


_MALLOC_TRIM = _find_malloc_trim()


class _Memory:
    warm = 0
    """Connections opened and not cooled (one that is simply dropped is still counted: a
    slower pace of trimming, nothing worse)."""
    freed = 0
    """Bytes cooled connections freed since the allocator last gave memory back."""


def _freed(size: int) -> None:
    """`size` bytes were freed. A trim walks the allocator's whole heap, so it waits until what
    was freed is a good share of that heap (a quarter of the warm connections' memory), or at
    least `TRIM_FLOOR`: the cost of trimming then stays in proportion to the memory returned."""
    _Memory.freed += size
    if _MALLOC_TRIM is None:
        return
    if _Memory.freed >= max(TRIM_FLOOR, _Memory.warm * CONNECTION_BYTES // 4):
        _Memory.freed = 0
        _MALLOC_TRIM(0)
