"""`python -m validators preflight STACK`: can this host run the stack?"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from stackgate.loading import load_stack
from stackgate.topology import TOPOLOGIES
from validators.commands._common import env_path, finish_results
from validators.preflight.group import evaluate_host, gather

NAME = "preflight"
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
    return finish_results(results, f"preflight {loaded.manifest.name}", args, started)
