"""JavaScript's string lengths, slices and JSON text in the runtime, and lone surrogates (half
of an emoji a slice cut through) kept as escapes wherever JSON text is written: the stored rows,
the trace's lines and the digest a report computes from those lines."""

from __future__ import annotations

import hashlib
import json

from agents_core.agent_tools.registry import default_input_preview, preview_json
from agents_core.js_strings import js_json, js_length, js_slice
from agents_core.jsontext import to_json_text
from reports.records import trace_digest
from sim.trace import TraceRecord

SMILE = "\U0001f642"


def test_lengths_and_slices_count_utf16_code_units() -> None:
    assert (js_length("abc"), js_length(SMILE), js_length("é" + SMILE)) == (3, 2, 3)
    assert js_slice("a" + SMILE + "b", 3) == "a" + SMILE
    assert js_slice("a" + SMILE + "b", 2) == "a\ud83d"  # the high half, alone
    assert js_slice("abc", 10) == "abc"


def test_json_text_writes_whole_floats_as_integers_and_keeps_key_order() -> None:
    assert js_json({"b": 1.0, "a": [0.5, -0.0, float("nan")]}) == '{"b":1,"a":[0.5,0,null]}'


def test_a_default_preview_is_cut_in_utf16_units() -> None:
    preview = default_input_preview("a" * 499 + SMILE)
    assert preview == "a" * 499 + "\ud83d"
    assert default_input_preview({"q": "x" * 600}) == '{"q":"' + "x" * 491 + "..."
    assert js_length(default_input_preview({"q": SMILE * 300})) == 500


def test_a_lone_surrogate_is_stored_as_an_escape() -> None:
    text = preview_json("a\ud83d")
    assert text == '"a\\ud83d"'
    assert json.loads(text) == "a\ud83d"
    assert to_json_text({"k": "\ud83d" + SMILE}) == '{"k":"\\ud83d' + SMILE + '"}'
    text.encode()  # valid UTF-8


def test_trace_lines_escape_a_lone_surrogate_and_reports_hash_them_alike() -> None:
    record = TraceRecord(1, 0, "A/a", 1, "x", {"preview": "a\ud83d", "smile": SMILE})
    line = record.to_json()
    assert "\\ud83d" in line and SMILE in line
    expected = hashlib.sha256(line.encode() + b"\n").hexdigest()
    assert trace_digest([json.loads(line)]) == expected
