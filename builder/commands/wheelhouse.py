"""`wheelhouse STACK --to DIR`: download every locked artifact for the target, hash-checked."""

from __future__ import annotations

import argparse
import threading
import time

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from builder.lock.wheelhouse import Artifact, artifacts, download
from stackgate.bounded_http import add_limit_arguments, limits_from
from stackgate.cli import emit_json
from stackgate.cli_numbers import WORKERS
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_OK, BadInput
from stackgate.layout import lock_files_of
from stackgate.lock.state import read_lock
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.paths import display_path
from stackgate.resource_limits import GIB

NAME = "wheelhouse"
HELP = "download every locked artifact of a stack (hash-checked) for offline builds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument("--to", type=FOLDER, required=True, help="the wheelhouse folder")
    parser.add_argument(
        "--locks-dir",
        type=FOLDER,
        default=None,
        help="the folder of lock folders (default: locks/ beside the manifest)",
    )
    parser.add_argument("--workers", type=WORKERS, default=4, help="parallel downloads (1-64)")
    add_limit_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        limits = limits_from(args)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    loaded = load_stack(args.stack)
    state = read_lock(loaded, lock_files_of(loaded.path, loaded.manifest.name, args.locks_dir))
    arts, _ = artifacts(state, loaded.manifest)
    total = sum(a.size or 0 for a in arts)
    console = console_err()
    progress = Progress(
        TextColumn("[bold]wheelhouse[/]"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    lock = threading.Lock()
    started = time.monotonic()
    with progress:
        task = progress.add_task("download", total=total or None)

        def advance(_art: Artifact, nbytes: int) -> None:
            with lock:
                progress.advance(task, nbytes)

        result = download(
            state,
            loaded.manifest,
            args.to,
            progress=advance,
            workers=args.workers,
            limits=limits,
        )
    seconds = time.monotonic() - started
    if args.json:
        emit_json(
            {
                "ok": True,
                "stack": loaded.manifest.name,
                "to": str(args.to),
                "lock_hash": state.lock_hash,
                "seconds": round(seconds, 2),
                **result,
            }
        )
    for item in result["skipped"]:
        console.print(styled("  [yellow]not in the wheelhouse[/]: {}", item))
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"wheelhouse {display_path(args.to)}: {result['files']} files "
            f"({result['downloaded']} downloaded, {result['kept']} already there), "
            f"{result['bytes'] / GIB:.2f} GiB in {seconds:.1f} s, every sha256 checked",
        )
    )
    return EXIT_OK
