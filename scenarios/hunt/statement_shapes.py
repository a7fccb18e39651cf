"""Statement shapes: what the hunts group a run's SQL statements by, and how a fault names one.

A shape is a statement's leading keywords and the first table it names (`UPDATE
cf_agents_runs`, `SELECT counts`). `statement_shape` reads it, `fault_group` is what the hunts
spread their faults over (a shape, with the whole schema set-up as one group), and
`shape_pattern` writes the anchored regex a storage fault's `match:` says. The storage injector
(`sim.sqlite`) knows none of this: it matches an armed fault's pattern against each statement
and nothing more, so the shapes live here, with the hunts that draw them (`fault_draws`,
`crash_points`).
"""

from __future__ import annotations

import re

__all__ = ["fault_group", "shape_pattern", "statement_shape"]

_SHAPE = re.compile(
    r"^\s*(?P<kind>INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|"
    r"DELETE\s+FROM|SELECT|CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)(?:\s+IF\s+NOT\s+EXISTS)?|"
    r"DROP\s+(?:TABLE|INDEX)(?:\s+IF\s+EXISTS)?|ALTER\s+TABLE|WITH|PRAGMA)\s*"
    r"(?P<table>\"?[A-Za-z_][A-Za-z0-9_]*\"?)?",
    re.IGNORECASE,
)
_FROM = re.compile(r"\bFROM\s+\"?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def statement_shape(statement: str) -> tuple[str, str]:
    """(kind, table) of a statement: `('UPDATE', 'cf_agents_runs')`, `('SELECT', 'counts')`;
    what the hunt groups statements by. The kind is the leading keyword(s) in upper case; the
    table is the first table named ('' when none is)."""
    match = _SHAPE.match(statement)
    if match is None:
        word = statement.split(None, 1)[0].upper() if statement.strip() else ""
        return word, ""
    kind = " ".join(match.group("kind").upper().split())
    kind = kind.replace(" INTO", "").replace(" FROM", "").replace(" IF NOT EXISTS", "")
    kind = kind.replace(" IF EXISTS", "")
    table = (match.group("table") or "").strip('"')
    if kind in ("SELECT", "WITH"):
        found = _FROM.search(statement)
        table = found.group(1) if found else ""
    return kind, table


def fault_group(statement: str) -> tuple[str, str]:
    """What the hunts spread their faults over: `statement_shape`, except that every schema
    statement (CREATE, DROP, ALTER) is one group, `('schema', '')`. An incarnation's schema set-up
    is one step of its startup whichever table a statement names; fifteen groups of it would
    crowd out the writes and reads recovery rests on."""
    kind, table = statement_shape(statement)
    if kind.startswith(("CREATE", "DROP", "ALTER")):
        return "schema", ""
    return kind, table


def shape_pattern(statement: str) -> str:
    """An anchored regex for the statements of `statement`'s shape (its leading keywords and
    first table, as written): `^UPDATE cf_agents_runs\\b` for any UPDATE of that table. What a
    reproducer's `match:` says; faults match statements with their whitespace collapsed."""
    kind, table = statement_shape(statement)
    words = statement.split()
    if not words:
        return "^$"

    def pattern(head: list[str]) -> str:
        end = r"\b" if re.match(r"\w", head[-1][-1:]) else ""
        return "^" + " ".join(re.escape(word) for word in head) + end

    if table and kind not in ("SELECT", "WITH"):
        for index, word in enumerate(words):
            if word.strip('"(').lower() == table.lower():
                return pattern(words[: index + 1])
    head = pattern(words[: len(kind.split())])
    return head + (r".* FROM " + re.escape(table) + r"\b" if table else "")
