"""The strict JUnit schema CI servers validate against (junit-10.xsd), as the rules it states.

No XML Schema library is installed and nothing is downloaded, so the constraints of the schema
that a document can break are written down here, element by element, and checked by
`violations(document)`:

- the root is `testsuites` (or one `testsuite`); `testsuites` holds only `testsuite`
  elements and no text; its attributes are `name`, `time`, `tests`, `failures` and `errors`
  (no `skipped`, no `disabled`);
- `testsuite` holds any of `testsuite`, `properties`, `testcase`, `system-out` and
  `system-err`; it must have `name`, `tests`, `failures` and `errors`, and may have `group`,
  `time`, `skipped`, `timestamp`, `hostname`, `id`, `package`, `file`, `log` and `url`;
- `testcase` holds any of `skipped`, `error`, `failure`, `rerunFailure`, `rerunError`,
  `flakyFailure`, `flakyError`, `system-out` and `system-err` (never `properties`); it must
  have `name` and may have `time`, `classname` and `group`;
- `failure`, `error` and `skipped` hold text only, with optional `type` and `message`;
  `properties` holds `property` elements, each with exactly `name` and `value` (both
  required); `system-out` and `system-err` are text (`xs:string`: no child element);
- `time` on `testsuites` and `testsuite` is a SUREFIRE_TIME:
  `(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\\.[0-9]*)?`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

__all__ = ["SUREFIRE_TIME", "violations"]

SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")


@dataclass(frozen=True)
class _Element:
    children: frozenset[str]
    required: frozenset[str]
    optional: frozenset[str]
    text: bool
    """Whether it may hold text (mixed content or xs:string)."""
    times: frozenset[str] = frozenset()
    """Attributes of type SUREFIRE_TIME."""


def _element(
    children: str = "", required: str = "", optional: str = "", *, text: bool, times: str = ""
) -> _Element:
    return _Element(
        frozenset(children.split()),
        frozenset(required.split()),
        frozenset(optional.split()),
        text,
        frozenset(times.split()),
    )


_RESULT = _element(optional="type message", text=True)
_RERUN = _element("stackTrace system-out system-err", "type", "message", text=True)
_STRING = _element(text=True)
SCHEMA = {
    "testsuites": _element(
        "testsuite", optional="name time tests failures errors", text=False, times="time"
    ),
    "testsuite": _element(
        "testsuite properties testcase system-out system-err",
        "name tests failures errors",
        "group time skipped timestamp hostname id package file log url",
        text=False,
        times="time",
    ),
    "testcase": _element(
        "skipped error failure rerunFailure rerunError flakyFailure flakyError system-out "
        "system-err",
        "name",
        "time classname group",
        text=False,
    ),
    "failure": _RESULT,
    "error": _RESULT,
    "skipped": _RESULT,
    "properties": _element("property", text=False),
    "property": _element(required="name value", text=False),
    "system-out": _STRING,
    "system-err": _STRING,
    "stackTrace": _STRING,
    "rerunFailure": _RERUN,
    "rerunError": _RERUN,
    "flakyFailure": _RERUN,
    "flakyError": _RERUN,
}
"""Each element the schema declares: what it may hold and which attributes it has."""


def violations(document: str) -> list[str]:
    """Every way `document` breaks the schema, one sentence each (empty: it validates)."""
    root = ET.fromstring(document.encode("utf-8"))
    if root.tag not in ("testsuites", "testsuite"):
        return [f"the root element is <{root.tag}>, expected <testsuites> or <testsuite>"]
    found: list[str] = []
    _check(root, f"/{root.tag}", found)
    return found


def _check(element: ET.Element, where: str, found: list[str]) -> None:
    rule = SCHEMA[element.tag]
    attributes = set(element.attrib)
    for name in sorted(rule.required - attributes):
        found.append(f"{where}: the required attribute {name!r} is missing")
    for name in sorted(attributes - rule.required - rule.optional):
        found.append(f"{where}: the attribute {name!r} is not declared for <{element.tag}>")
    for name in sorted(rule.times & attributes):
        if not SUREFIRE_TIME.fullmatch(element.attrib[name]):
            found.append(f"{where}: {name}={element.attrib[name]!r} is not a SUREFIRE_TIME")
    if not rule.text and (element.text or "").strip():
        found.append(f"{where}: <{element.tag}> may not hold text")
    for number, child in enumerate(element, start=1):
        place = f"{where}/{child.tag}[{number}]"
        if not rule.text and (child.tail or "").strip():
            found.append(f"{where}: <{element.tag}> may not hold text")
        if child.tag not in rule.children:
            found.append(f"{place}: <{child.tag}> is not allowed in <{element.tag}>")
            continue
        _check(child, place, found)
