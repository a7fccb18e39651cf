"""What `agentsim run` leaves behind when Ctrl-C stops it: the finished runs' JUnit and summary.

The runs that finished are known (their results came back, in order); the others are marked as
not run. JUnit gets a test case for each of those with a `skipped` element saying why, so CI
shows the whole sweep, how far it got and which runs it never made. The renderer
(`reports.junit`) writes the finished runs; the cases added here follow them, and the suite's
`tests` and `skipped` counts are made to match.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from reports.junit import classname

__all__ = ["NOT_RUN", "interrupted_line", "with_not_run"]

NOT_RUN = "not run: the sweep was interrupted (Ctrl-C) before this run finished"


def with_not_run(document: str, not_run: Sequence[tuple[str, str, int | None]]) -> str:
    """The JUnit `document` with a skipped test case for each (name, path, seed) not run."""
    if not not_run:
        return document
    root = ET.fromstring(document)
    suite = root.find("testsuite")
    assert suite is not None  # reports.junit always writes one
    for name, path, seed in not_run:
        case = ET.SubElement(
            suite,
            "testcase",
            {"name": f"{name} [seed {seed}]", "classname": classname(path), "time": "0.000"},
        )
        ET.SubElement(case, "skipped", {"message": NOT_RUN})
    total = str(int(suite.get("tests", "0")) + len(not_run))
    suite.set("tests", total)
    suite.set("skipped", str(int(suite.get("skipped", "0")) + len(not_run)))
    root.set("tests", total)
    ET.indent(root, space="  ")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{ET.tostring(root, encoding="unicode")}\n'


def interrupted_line(finished: int, total: int) -> str:
    """`interrupted: 3 of 10 runs finished, 7 not run (...)`."""
    return (
        f"interrupted: {finished} of {total} runs finished, {total - finished} not run (the "
        f"results above, the summary and the JUnit file are those of the finished runs)"
    )
