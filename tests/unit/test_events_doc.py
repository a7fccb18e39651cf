"""docs/events.md is generated from the code and kept current: every event name written has a
sentence saying when, no sentence outlives its name, and every record of the golden traces is
covered."""

from __future__ import annotations

from pathlib import Path

from scenarios.run.events_doc import DOC_PATH, FAMILIES, WHEN, emit_sites, family_of, render

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "scenarios" / "library"


def golden_events() -> set[str]:
    """The event column of every golden trace (`time agent inc event fields...`)."""
    events = set()
    for golden in LIBRARY.glob("*.golden"):
        for line in golden.read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                events.add(line.split()[3])
    return events


def test_docs_events_md_is_current() -> None:
    """The committed file is what the code gives; regenerate with python -m
    scenarios.run.events_doc."""
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/events.md is out of date: run python -m scenarios.run.events_doc"
    )


def test_every_event_written_says_when() -> None:
    """A name written anywhere in the runtime, the platform or the workloads has its sentence,
    and every sentence names a record that is still written."""
    emitted = {event for event in emit_sites() if family_of(event) is None}
    assert sorted(emitted - set(WHEN)) == [], "add these to scenarios.run.events_doc.WHEN"
    assert sorted(set(WHEN) - emitted) == [], "nothing writes these any more"


def test_every_record_of_the_golden_traces_is_documented() -> None:
    """What the library's runs really write, names built at run time included, is covered."""
    documented = set(emit_sites())
    missing = sorted(e for e in golden_events() if e not in documented and family_of(e) is None)
    assert len(golden_events()) > 50
    assert missing == []


def test_the_scanner_reads_names_fields_and_writers_from_the_source() -> None:
    """Keyword fields, a dict of fields, names looped over, and the function that writes."""
    sites = emit_sites()
    assert sites["alarm:set"].fields == {"at", "rolled_back"}
    assert sites["alarm:set"].writers == {"sim.alarms._arm", "sim.alarms._put_back"}
    assert sites["connection:close"].fields == {"by", "code", "connection", "reason"}
    assert {"fiberId", "elapsedMs"} <= sites["fiber:recovery:detected"].fields
    assert sites["fiber:run:interrupted"].writers == {"agents_core.recovery._emit_detected"}


def test_names_built_at_run_time_are_matched_by_their_family() -> None:
    """`fault:crash` and `rpc:error` have a family; an agent's own `user:x` does not."""
    assert family_of("fault:crash_after_commit") is FAMILIES[4]
    assert family_of("rpc:error") is not None and family_of("request") is not None
    assert family_of("user:resumed") is None
    text = render()
    assert "| `fault:<kind>` | `statement` |" in text
    assert "| `alarm:set` | `at`, `rolled_back` | The agent's alarm slot is set" in text
