"""Read the builder's build record as plain JSON (validators never import builder internals).

The contract is the field names of `<env>/stackgate/build-record.json` (builder/record.py says
they are only ever added, never renamed): manifest_hash, lock_hash, tree.sha256, packages,
tools, topology, env_profile. Anything else is kept verbatim under `raw`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackgate.errors import BadInput
from validators.context import BUILD_RECORD_RELPATH
from validators.records.model import BuildFacts


def build_record_path(env: Path) -> Path:
    return env / BUILD_RECORD_RELPATH


def parse_build_record(data: dict[str, Any], *, image_digest: str | None = None) -> BuildFacts:
    tree = data.get("tree")
    tools = data.get("tools")
    packages = data.get("packages")
    return BuildFacts(
        manifest_sha256=_str(data.get("manifest_hash")),
        lock_sha256=_str(data.get("lock_hash")),
        env_tree_sha256=_str(tree.get("sha256")) if isinstance(tree, dict) else None,
        image_digest=image_digest or _str(data.get("image_digest")),
        python=_str(tools.get("python")) if isinstance(tools, dict) else None,
        topology=_str(data.get("topology")),
        packages={str(k): str(v) for k, v in packages.items()}
        if isinstance(packages, dict)
        else {},
        tools=(
            {str(k): str(v) for k, v in tools.items() if v is not None}
            if isinstance(tools, dict)
            else {}
        ),
        raw=data,
    )


def read_build_facts(env: Path, *, image_digest: str | None = None) -> BuildFacts:
    """The env's build facts; BadInput when the env has no readable build record."""
    path = build_record_path(env)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(
            f"{env}: no build record at {path}; was this environment built by "
            "`python -m builder build`?"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: unreadable build record: {exc}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: build record is not a JSON object")
    return parse_build_record(data, image_digest=image_digest)


def env_profile(data: dict[str, Any]) -> dict[str, str]:
    profile = data.get("env_profile")
    return {str(k): str(v) for k, v in profile.items()} if isinstance(profile, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
