"""`lock STACK`: generate the stack's uv project and lock it (stacks/locks/<stack>/uv.lock)."""

from __future__ import annotations

import argparse
import time
from contextlib import AbstractContextManager

from rich.text import Text

from builder.lock.resolve import locked_packages, run_lock
from builder.lock.torch_abi_gate import TorchAbiGate
from builder.lock.uvproject import index_map_credentials, parse_index_map
from stackgate.cli import emit_json
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_OK
from stackgate.heartbeat import Heartbeat
from stackgate.layout import lock_files_of
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.paths import display_path
from stackgate.python_finder import find_python

NAME = "lock"
HELP = "resolve a manifest with uv into stacks/locks/<stack>/ (pyproject.toml + uv.lock)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument(
        "--index-map",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="resolve the manifest's index NAME from URL instead (mirror or local folder)",
    )
    parser.add_argument("--python", default=None, help="interpreter path or version to use")
    parser.add_argument(
        "--locks-dir",
        type=FOLDER,
        default=None,
        help="where the lock folder goes (default: locks/ beside the manifest: stacks/locks "
        "for a shipped stack)",
    )
    parser.add_argument(
        "--upgrade", action="store_true", help="re-resolve everything, not just what changed"
    )
    parser.add_argument(
        "--no-compat",
        action="store_true",
        help="do not check that the lock's binary packages load beside its torch "
        "(recorded as off in the lock folder's compat.json)",
    )


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    manifest = loaded.manifest
    index_map = parse_index_map(args.index_map, manifest)
    python = find_python(manifest.python, args.python)
    files = lock_files_of(loaded.path, manifest.name, args.locks_dir)
    console = console_err()
    started = time.monotonic()
    abi_gate = TorchAbiGate.for_manifest(files.folder, manifest)
    doing = f"locking {manifest.name} with uv ({python.path}), then checking its binary packages"
    # On a terminal a spinner; piped, a line when it first starts and every 15 s after (a
    # cold cu128 lock printed nothing for 44 s).
    waiting: AbstractContextManager[object] = (
        console.status(Text(doing))
        if console.is_terminal
        else Heartbeat(
            lambda line: console.print(line, markup=False, highlight=False),
            lambda s: f"  still {doing} ({s:.0f} s)",
        )
    )
    if not console.is_terminal:
        console.print(doing, markup=False, highlight=False)
    with waiting:
        state = run_lock(
            loaded,
            files,
            python,
            index_map=index_map,
            credentials=index_map_credentials(args.index_map),
            upgrade=args.upgrade,
            vet=None if args.no_compat else abi_gate,
        )
    record = abi_gate.record(state.lock_hash, off=args.no_compat)
    seconds = time.monotonic() - started
    packages = locked_packages(state)
    if args.json:
        emit_json(
            {
                "ok": True,
                "stack": manifest.name,
                "lock": str(files.lockfile),
                "lock_hash": state.lock_hash,
                "manifest_hash": state.manifest_hash,
                "packages": len(packages),
                "index_map": index_map,
                "compat": record,
                "seconds": round(seconds, 2),
            }
        )
    for name in sorted(manifest.packages):
        console.print(f"  {name} == {packages.get(name, '?')}", highlight=False)
    console.print(abi_gate.line(off=args.no_compat), highlight=False, markup=False, soft_wrap=True)
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"locked {manifest.name}: {len(packages)} packages in {seconds:.1f} s -> "
            f"{display_path(files.lockfile)} (lock {state.short_hash})",
        )
    )
    return EXIT_OK
