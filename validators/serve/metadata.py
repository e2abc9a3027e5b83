"""What a benchmark record says about where it was measured: stack, profile, host, GPUs,
package versions inside the served environment, and the stackgate commit."""

from __future__ import annotations

import json
import platform
import socket
import time
from typing import Any

from stackgate import proc
from stackgate.engines import ENGINES
from stackgate.errors import StackgateError
from stackgate.paths import project_root
from validators.core.context import RunContext
from validators.serve.adapters import LaunchSpec
from validators.serve.gpu import snapshot

# Every engine's packages (stackgate.engines) plus the NCCL wheels all of them load.
_PACKAGES = sorted(
    {p for e in ENGINES.values() for p in e.packages} | {"nvidia-nccl-cu12", "nvidia-nccl-cu13"}
)
_VERSIONS_SCRIPT = """
import json, sys, importlib.metadata as m
out = {}
for name in sys.argv[1:]:
    try:
        out[name] = m.version(name)
    except m.PackageNotFoundError:
        pass
print(json.dumps(out))
"""


def run_metadata(
    ctx: RunContext, profile_name: str, spec: LaunchSpec, python: str
) -> dict[str, Any]:
    versions: dict[str, str] = {}
    try:
        done = proc.run([python, "-c", _VERSIONS_SCRIPT, *_PACKAGES], check=False, timeout=60)
        if done.returncode == 0:
            versions = json.loads(done.stdout.strip().splitlines()[-1])
    except (StackgateError, ValueError, IndexError):
        pass
    commit, dirty = _stackgate_commit()
    gpu = snapshot()
    return {
        "stack": ctx.stack.manifest.name,
        "profile": profile_name,
        "engine": spec.engine,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "gpus": len(gpu.used_mib) if gpu is not None else 0,
        "topology": ctx.topology,
        "versions": versions,
        "stackgate_commit": commit,
        "stackgate_tree_dirty": dirty,
        "argv": spec.argv,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _stackgate_commit() -> tuple[str, bool | None]:
    """The checkout's commit and whether its tracked files differ from it (None: unknown).

    A commit alone claimed more than was known: a copied checkout whose .git lagged behind its
    files recorded the old commit for the code that ran."""
    try:
        head = proc.run(["git", "rev-parse", "HEAD"], cwd=project_root(), check=False, timeout=10)
        if head.returncode != 0:
            return "", None
        status = proc.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=project_root(),
            check=False,
            timeout=30,
        )
    except StackgateError:
        return "", None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip(), dirty
