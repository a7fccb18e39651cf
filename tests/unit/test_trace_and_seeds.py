"""The trace (canonical JSONL, digest, reading back), seeded streams, durations and the
structlog rendering."""

from __future__ import annotations

import pytest

from agents_core import Agent
from sim import Simulation, format_sim_time, parse_duration_ms
from sim.prng import NANOID_ALPHABET, Seeds
from sim.record_text import render
from sim.trace import Trace


class Noisy(Agent):
    async def shout(self) -> None:
        self.host.trace.emit("user:shout", when=self.host.clock.now_ms(), data={"b": 2, "a": 1})


def test_records_roundtrip_through_jsonl(tmp_path, sim: Simulation) -> None:
    """A trace written as JSONL reads back into equal records with the same digest."""
    ref = sim.agent(Noisy, "n")
    sim.call(ref, "shout")
    path = sim.trace.write_jsonl(tmp_path / "t.jsonl")
    back = Trace.read_jsonl(path)
    assert back == sim.trace.records
    copy = Trace()
    for r in back:
        copy.append(r.t_ms, r.agent, r.inc, r.event, r.fields)
    assert copy.digest() == sim.digest()


def test_a_record_line_is_canonical_json() -> None:
    """Keys are sorted and there are no spaces, so the same record is the same bytes."""
    trace = Trace()
    record = trace.append(1500, "A/x", 2, "user:e", {"z": 1, "a": [1, {"d": 0, "c": 1}]})
    assert record.to_json() == (
        '{"a":[1,{"c":1,"d":0}],"agent":"A/x","event":"user:e","inc":2,"seq":0,"t":1500,"z":1}'
    )


def test_fields_that_are_not_json_are_written_without_addresses() -> None:
    """Objects become their type and str(); exceptions their type and message."""
    trace = Trace()
    record = trace.append(0, "", 0, "e", {"err": ValueError("bad"), "obj": object(), "s": {3, 1}})
    assert record.get("err") == "ValueError: bad"
    assert record.get("obj").startswith("<object> <object object at")  # str() of object
    assert record.get("s") == [1, 3]


def test_reserved_field_names_are_refused() -> None:
    """A field may not shadow the record's own keys."""
    with pytest.raises(ValueError, match="trace field name 'seq' is reserved"):
        Trace().append(0, "", 0, "e", {"seq": 1})


def test_a_bad_trace_line_names_file_and_line(tmp_path) -> None:
    """Reading a broken JSONL file says where it broke."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"seq":0,"t":0,"agent":"","inc":0,"event":"x"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not a trace record"):
        Trace.read_jsonl(path)


def test_streams_are_independent() -> None:
    """Drawing from one stream never shifts another."""
    plain, busy = Seeds(42), Seeds(42)
    for _ in range(100):
        busy.stream("faults").random()
    assert [plain.stream("eviction").random() for _ in range(5)] == [
        busy.stream("eviction").random() for _ in range(5)
    ]
    assert Seeds(42).stream("ids").nanoid() != Seeds(43).stream("ids").nanoid()


def test_nanoids_have_the_sdk_shape() -> None:
    """21 symbols (or the size asked) from nanoid's URL-safe alphabet."""
    stream = Seeds(1).stream("ids")
    ids = [stream.nanoid() for _ in range(50)] + [stream.nanoid(9)]
    assert all(set(i) <= set(NANOID_ALPHABET) for i in ids)
    assert [len(i) for i in ids] == [21] * 50 + [9]
    assert len(set(ids)) == 51


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90s", 90_000),
        ("14m59s", 899_000),
        ("1h30m", 5_400_000),
        ("250ms", 250),
        ("0", 0),
        ("2d", 172_800_000),
        (1234, 1234),
        ("1m 30s", 90_000),
    ],
)
def test_durations_parse_to_whole_milliseconds(text, ms) -> None:
    """The scenario duration form."""
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "1.5s", "s", "30s1m", "5x", "1m1m", -3, True, None])
def test_bad_durations_say_what_is_allowed(text) -> None:
    """Anything else is refused with an example of the form."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration_ms(text)


def test_sim_time_is_rendered_for_people() -> None:
    """HH:MM:SS.mmm, with days past the first."""
    assert format_sim_time(0) == "00:00:00.000"
    assert format_sim_time(899_000) == "00:14:59.000"
    assert format_sim_time(90_061_001) == "1d01:01:01.001"


def test_structlog_rendering_uses_sim_time_and_agent(sim: Simulation) -> None:
    """The human line carries sim time, agent#incarnation, event and sorted fields."""
    sim.run_for(61_000)
    ref = sim.agent(Noisy, "n")
    sim.call(ref, "shout")
    line = render(sim.trace.select("user:shout")[0])
    assert line.startswith("00:01:01.000 Noisy/n#1 user:shout")
    assert "data={'a': 1, 'b': 2}" in line and "when=61000" in line


def test_a_trace_line_that_is_not_an_object_is_refused(tmp_path) -> None:
    """Valid JSON that is not an object is a bad record, reported like any other."""
    path = tmp_path / "list.jsonl"
    path.write_text("[]\n")
    with pytest.raises(ValueError, match=r"list\.jsonl:1: not a trace record .*not an object"):
        Trace.read_jsonl(path)
