"""`python -m validators preflight STACK`: can this host run the stack?"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from stackgate.manifest import Manifest
from stackgate.manifest.loading import load_stack
from stackgate.topology import TOPOLOGIES
from validators.commands._common import env_path, finish_results
from validators.core.results import Result
from validators.preflight.group import evaluate_host, gather

NAME = "preflight"
# The checks without which "can this host run the stack?" has no answer.
DECIDING = ("host.driver", "host.gpus")
HELP = (
    "host checks: driver, GPUs and archs, interconnect, P2P, memory, swap, disk, nvcc, host rules"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="stack name or manifest")
    parser.add_argument(
        "--env", help="the environment (to read the topology profile it was built with)"
    )
    parser.add_argument("--topology", choices=TOPOLOGIES, help="the profile the env carries")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    loaded = load_stack(args.stack)
    path = env_path(args.env)
    facts = gather(path or Path.cwd())
    results = evaluate_host(loaded.manifest, facts, env_path=path, topology=args.topology)
    return finish_results(
        results,
        f"preflight {loaded.manifest.name}",
        args,
        started,
        incomplete=not_decided(loaded.manifest, results),
    )


def not_decided(manifest: Manifest, results: Sequence[Result]) -> str | None:
    """Why "can this host run the stack?" was not answered: the driver or GPU checks were
    skipped (no driver, no GPU). None when they ran."""
    skipped = [r.check for r in results if r.check in DECIDING and r.status == "SKIP"]
    if not skipped:
        return None
    needs = [f"it targets {', '.join(manifest.host.target_archs)}"]
    needs.append(f"driver >= {manifest.host.min_driver}")
    name = manifest.validation.serve_profile or ""
    profile = manifest.serving.get(name)
    if profile is not None:
        needs.append(f"serving profile {name} needs {profile.tp} GPU(s)")
    return (
        f"{' and '.join(skipped)} skipped: no NVIDIA driver or GPU here, so whether this host "
        f"can run {manifest.name} was not checked; {', '.join(needs)}"
    )
