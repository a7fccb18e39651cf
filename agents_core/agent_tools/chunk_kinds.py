"""What kind of chunk a child's stream body is, as 0.32.0 sorts them (spec sdk-0.32 §7.2).

A *lifecycle* chunk is a progress or milestone part (JSON whose `type` is `data-agent-progress`
or `data-agent-milestone`; the SDK's `isAgentToolLifecycleChunk`). A chunk *too large to store*
is one whose stored encoding (the body written again as a JSON string, in UTF-8, as the SDK's
`storedChunkBytes` measures it) is over `CHUNK_MAX_BYTES`: a 0.32.0 chat child broadcasts it live
but keeps it out of its stream, and its tail record carries a random `unstoredId` instead. Both
kinds are *positionless* on the forwarding path: they carry the next sequence without consuming
it. Which release uses any of this is the release's own choice (its delivery policy, its chat
components); nothing here is read on 0.21.0.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agents_core.jsontext import to_json_text

if TYPE_CHECKING:
    from agents_core.host import Entropy

__all__ = [
    "CHUNK_MAX_BYTES",
    "LIFECYCLE_TYPES",
    "is_lifecycle_chunk",
    "random_uuid",
    "stored_chunk_bytes",
    "too_large_to_store",
]

LIFECYCLE_TYPES = ("data-agent-progress", "data-agent-milestone")

CHUNK_MAX_BYTES = 1_800_000
"""The SDK's `CHUNK_MAX_BYTES` (18e5): a chunk whose stored encoding is larger is not stored."""

_MAX_BYTES_PER_UNIT = 6
"""The most UTF-8 bytes one character of a body takes once written as a JSON string (a control
character escaped as `\\u00XX`); a body this short can never be too large, unmeasured."""


def is_lifecycle_chunk(body: str) -> bool:
    """The SDK's `isAgentToolLifecycleChunk`: a progress or milestone part."""
    if "data-agent-progress" not in body and "data-agent-milestone" not in body:
        return False
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("type") in LIFECYCLE_TYPES


def stored_chunk_bytes(body: str) -> int:
    """The SDK's `storedChunkBytes`: the UTF-8 length of `JSON.stringify(body)`."""
    return len(to_json_text(body, "a chunk body").encode("utf-8"))


def too_large_to_store(body: str) -> bool:
    """The SDK's `isChunkTooLargeToStore`: the stored encoding is over `CHUNK_MAX_BYTES`."""
    if _MAX_BYTES_PER_UNIT * len(body) + 2 <= CHUNK_MAX_BYTES:
        return False
    return stored_chunk_bytes(body) > CHUNK_MAX_BYTES


def random_uuid(entropy: Entropy) -> str:
    """A version-4 UUID (`crypto.randomUUID()`) drawn from the host's seeded entropy."""
    bits = 0
    for _ in range(4):
        bits = (bits << 32) | int(entropy.random() * 2**32)
    bits = (bits & ~(0xF << 76)) | (0x4 << 76)  # version 4
    bits = (bits & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    text = f"{bits:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
