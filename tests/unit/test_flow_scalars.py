"""A reproducer's strings read back as they were drawn: a character outside the BMP (an emoji)
is written with YAML's 8-digit escape, not JSON's surrogate pair, which YAML reads as two lone
surrogates; a lone surrogate stays one."""

from __future__ import annotations

import pytest
import yaml

from scenarios.hunt.emit import flow_scalar


@pytest.mark.parametrize(
    "text",
    ["r" * 498 + "\U0001f642", "a\ud83d", "\u00e9t\u00e9", "plain words", "x: y", "1.5"],
)
def test_a_string_reads_back_as_itself(text: str) -> None:
    assert yaml.safe_load(f"v: {flow_scalar(text)}")["v"] == text


def test_an_emoji_is_one_escape() -> None:
    assert flow_scalar("\U0001f642 ok") == '"\\U0001F642 ok"'
