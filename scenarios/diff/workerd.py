"""The real side: hand compiled plans to the workerd step runner and read back what it played.

The npm project lives in `differential/` (pinned `package.json` and lockfile). One vitest run
plays every plan: the plans go in a JSON file named by `AGENTSIM_DIFF_PLANS`, the plays come
back in the file named by `AGENTSIM_DIFF_OUT` (`differential/reporter.ts`). `--sdk VERSION`
plays on another release of `agents`: a copy of the project under `differential/.sdk/VERSION`
with that version installed, made once and reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "PROJECT",
    "RealSideUnavailable",
    "missing_reason",
    "pinned_version",
    "play_plans",
    "project_for",
]

PROJECT = Path(__file__).resolve().parents[2] / "differential"
_PROJECT_FILES = (
    "package.json",
    "package-lock.json",
    "vitest.config.ts",
    "reporter.ts",
    "wrangler.jsonc",
    "src",
    "test",
)
PLAY_TIMEOUT_S = 1_800
_SDK_PEERS = ("@modelcontextprotocol/client", "@modelcontextprotocol/sdk", "ai", "zod")
"""The pinned project's peers of `agents`; a copy for another release lets npm choose them."""
CHAT_RELEASES = {"0.32.0": "0.12.2"}
"""`agents` version -> the `@cloudflare/ai-chat` release built for it, which the chat players
use there (the pinned project's for any other version)."""


NO_NODE = "node is not installed (the real side runs the SDK in workerd through Node 20+)"


class RealSideUnavailable(RuntimeError):
    """Node, npm or the installed project is missing (the sentence says which and the fix)."""


@dataclass(frozen=True)
class Play:
    """What one plan left: its plays (one per repetition) or the error that stopped it."""

    plays: list[dict[str, Any]]
    error: str | None


def missing_reason(project: Path = PROJECT) -> str | None:
    """Why the real side cannot run here, or None."""
    if shutil.which("node") is None:
        return NO_NODE
    if not (project / "node_modules" / "@cloudflare" / "vitest-pool-workers").is_dir():
        return f"the npm project is not installed: run `npm ci` in {project}"
    return None


def pinned_version(project: Path = PROJECT) -> str:
    """The version of `agents` the pinned project plays (its package.json)."""
    package = json.loads((project / "package.json").read_text(encoding="utf-8"))
    return str(package["devDependencies"]["agents"])


def project_for(sdk: str | None) -> Path:
    """The project directory that plays with `agents@sdk` (None, or the pinned version: the
    pinned one)."""
    if sdk is None or sdk == pinned_version():
        return PROJECT
    if shutil.which("node") is None:
        raise RealSideUnavailable(NO_NODE)
    if shutil.which("npm") is None:
        raise RealSideUnavailable(
            f"npm is not installed; playing agents@{sdk} needs it to install that version beside "
            f"the pinned one ({pinned_version()})"
        )
    target = PROJECT / ".sdk" / sdk
    target.mkdir(parents=True, exist_ok=True)
    # The worker, its agents and the runner are copied afresh every time (an installed copy
    # must not play with yesterday's runner); only the npm install is done once.
    for name in _PROJECT_FILES:
        source = PROJECT / name
        if source.is_dir():
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name)
        elif source.exists() and name not in ("package-lock.json", "package.json"):
            shutil.copy2(source, target / name)
    chat = CHAT_RELEASES.get(sdk)
    if (target / "node_modules" / "agents").is_dir() and _installed(target, CHAT) == (
        chat or _installed(target, CHAT)
    ):
        return target
    shutil.copy2(PROJECT / "package.json", target / "package.json")
    package = json.loads((target / "package.json").read_text())
    package["devDependencies"]["agents"] = sdk
    if chat is not None:
        package["devDependencies"][CHAT] = chat
    # The SDK's peers follow its version: npm installs the ones that release asks for.
    for peer in _SDK_PEERS:
        package["devDependencies"].pop(peer, None)
    (target / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund"],
        cwd=target,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).splitlines()
        tail = [line for line in lines if line.removeprefix("npm error").strip()][:6]
        raise RealSideUnavailable(f"npm install of agents@{sdk} failed: {' / '.join(tail)}")
    return target


CHAT = "@cloudflare/ai-chat"


def _installed(project: Path, name: str) -> str | None:
    """The version of package `name` installed in `project` (None when it is not)."""
    manifest = project / "node_modules" / name / "package.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text(encoding="utf-8")).get("version"))


def play_plans(plans: list[dict[str, Any]], project: Path = PROJECT) -> dict[str, Play]:
    """Play `plans` in one vitest run; plan name -> its `Play`."""
    reason = missing_reason(project)
    if reason is not None:
        raise RealSideUnavailable(reason)
    if not plans:
        return {}
    with tempfile.TemporaryDirectory(prefix="agentsim-diff-") as scratch:
        plans_path = Path(scratch) / "plans.json"
        out_path = Path(scratch) / "plays.json"
        plans_path.write_text(json.dumps({"plans": plans}))
        env = dict(os.environ)
        env.update(
            AGENTSIM_DIFF_PLANS=str(plans_path),
            AGENTSIM_DIFF_OUT=str(out_path),
            NO_COLOR="1",
            CI="1",
        )
        vitest = project / "node_modules" / "vitest" / "vitest.mjs"
        try:
            done = subprocess.run(
                ["node", str(vitest), "run"],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=PLAY_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RealSideUnavailable(f"vitest did not finish within {PLAY_TIMEOUT_S} s") from exc
        if not out_path.exists():
            tail = (done.stderr + done.stdout).strip().splitlines()[-12:]
            raise RealSideUnavailable("vitest wrote no plays:\n    " + "\n    ".join(tail))
        raw = json.loads(out_path.read_text())
    return {
        name: Play(list(entry.get("plays") or []), entry.get("error"))
        for name, entry in raw.items()
    }
