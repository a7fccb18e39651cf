"""The fenced code blocks of README.md and docs/*.md, with the marks that say how a test runs them.

Every block is found, whoever adds it: `blocks()` reads the files afresh. A block is run
according to its language, and an HTML comment on the line before its fence (invisible in the
rendered page) changes that:

    <!-- example: skip (why) -->                  not run; the reason is required
    <!-- example: fragment in FILE at PLACE -->   YAML that is a part of a scenario: it is put
                                                  into the scenario FILE (a path from the root)
                                                  at PLACE and the whole is validated; PLACE is
                                                  `top` (top-level keys; `agents` and
                                                  `clients` merged), `agents` (merged),
                                                  `steps` or `expect` (a list, appended)
    <!-- example: continues -->                   Python that runs after the file's previous
                                                  Python block, in the same program
    <!-- example: exit N -->                      a bash block whose commands exit N
    <!-- example: checked by TEST -->             a dedicated test of tests/test_readme.py runs
                                                  it (that test must exist)

Languages: `yaml`/`yml` (a whole scenario is validated and run, and must pass), `python` (run
as a program; one that defines `test_*` functions is run by pytest), `bash`/`sh` (each line
that starts with `agentsim ` is run), `json` (parsed), and a block with no language, which is
text (output shown to the reader) and is not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LANGUAGES = {"yaml": "yaml", "yml": "yaml", "python": "python", "bash": "bash", "sh": "bash"}
LANGUAGES |= {"json": "json", "": "text"}

_FENCE = re.compile(r"^```([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its mark (or '')."""

    path: Path
    line: int
    language: str
    text: str
    mark: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        """The language's family (`yaml`, `python`, `bash`, `json`, `text`), or `unknown:X`."""
        return LANGUAGES.get(self.language, f"unknown:{self.language}")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        start = index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index].rstrip() != "```":
            body.append(lines[index])
            index += 1
        mark = _MARK.match(lines[start - 1]) if start else None
        text = "\n".join(body) + "\n"
        out.append(Block(path, start + 1, opened.group(1), text, mark.group(1) if mark else ""))
        index += 1
    return out


def blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks_of(path)]


def program_of(block: Block, all_blocks: list[Block]) -> str:
    """A Python block's program: itself, after the blocks it continues."""
    same_file = [b for b in all_blocks if b.path == block.path and b.kind == "python"]
    at = same_file.index(block)
    parts = [block.text]
    while same_file[at].mark == "continues":
        if at == 0:
            raise AssertionError(f"{block.where}: 'continues' but no Python block before it")
        at -= 1
        parts.insert(0, same_file[at].text)
    return "\n\n".join(parts)
