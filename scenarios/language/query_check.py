"""What `validate` checks of a `query` expectation's SQL before any run: that it parses as one
statement, that it only reads, and that it has as many parameters as placeholders.

The tables are the agent's, made at run time, so the statement is prepared against an empty
database with `EXPLAIN`: `no such table` is fine there, a syntax error is not. Whether it only
reads is judged by its first keyword (and, for `WITH`, by what follows the common table
expressions). The run itself is the last word: `Simulation.read` refuses anything but a read.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from scenarios.language.fields import Fields, show

__all__ = ["SQL_HINT", "check_query"]

_READ_KEYWORDS = ("SELECT", "WITH", "VALUES", "PRAGMA")
_COMMENTS = re.compile(r"\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/)", re.DOTALL)
_WRITE_AFTER_WITH = re.compile(r"\)\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
SQL_HINT = (
    "an expectation's query reads the agent's storage: one SELECT (or WITH ... SELECT, "
    "VALUES, PRAGMA table_info(...)); it may not write, attach or change a setting"
)


def check_query(fields: Fields, sql: str, params: tuple[Any, ...]) -> None:
    """The query parses as one statement that reads. The tables are the agent's, known only
    when the run ends, so `no such table` here is fine; a syntax error, two statements, a
    write or a wrong number of parameters is not. (At run time an authorizer refuses anything
    but a read as well: `Simulation.read`.)"""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute(f"EXPLAIN {sql}", params)
    except sqlite3.OperationalError as exc:
        if not str(exc).startswith("no such "):
            fields.fail("sql", f"sql: {show(sql)} is not valid SQL ({exc})", SQL_HINT)
    except (sqlite3.Error, ValueError, OverflowError) as exc:
        fields.fail("sql", f"sql: {show(sql)}: {str(exc).rstrip('.')}", SQL_HINT)
    finally:
        probe.close()
    start = 0  # past the leading comments, each matched once from where the last ended
    while (comment := _COMMENTS.match(sql, start)) is not None and comment.end() > start:
        start = comment.end()
    text = sql[start:]
    words = text.split(None, 1)
    keyword = words[0].upper().split("(", 1)[0] if words else ""
    if keyword not in _READ_KEYWORDS or _WRITE_AFTER_WITH.search(text):
        fields.fail("sql", f"sql: {show(sql)} does not only read", SQL_HINT)
    if keyword == "PRAGMA" and "=" in text:
        fields.fail("sql", f"sql: {show(sql)} changes a setting", SQL_HINT)
