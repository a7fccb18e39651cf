"""A failure file is input like any other: when its `path` names a file that is not a
scenario, replay refuses it (exit 2) without quoting a byte of that file; a scenario of the
user's that has gone invalid is still shown with the loader's located error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenarios.test_cli import failing, run_cli

SECRET = "s3cr3t-token-9f2c"


def _failure_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    scenario = failing(tmp_path)
    code, _, _ = run_cli(capsys, "run", scenario, "--failures", str(tmp_path / "f"))
    assert code == 1
    (found,) = (tmp_path / "f").glob("*.json")
    return found


def _point_at(failure_file: Path, target: Path) -> None:
    record = json.loads(failure_file.read_text("utf-8"))
    record["path"] = record["abs_path"] = str(target)
    failure_file.write_text(json.dumps(record), "utf-8")


@pytest.mark.parametrize(
    "content",
    [
        f"root:x:0:0:{SECRET}:/root:/bin/bash\n",  # a plain text file (YAML reads a string)
        f"api_key: {SECRET}\nregion: eu\n",  # a YAML mapping, but no scenario
        f"[{SECRET}, 1, 2]\n",
        f"{{{{ {SECRET}\n",  # not YAML at all
    ],
)
def test_a_failure_file_pointing_at_another_file_quotes_none_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    failure_file = _failure_file(tmp_path, capsys)
    other = tmp_path / "credentials"
    other.write_text(content, "utf-8")
    _point_at(failure_file, other)
    code, out, err = run_cli(capsys, "replay", str(failure_file))
    assert code == 2
    assert SECRET not in out + err
    assert f"its scenario {str(other)!r} is not a scenario file" in err, err


def test_the_users_own_invalid_scenario_is_still_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scenario edited into an invalid one keeps the loader's located error."""
    failure_file = _failure_file(tmp_path, capsys)
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(scenario.read_text("utf-8").replace("seed: 7", "seed: seven"), "utf-8")
    code, _, err = run_cli(capsys, "replay", str(failure_file))
    assert code == 2
    assert "bad.yaml:3: seed: 'seven'" in err, err
