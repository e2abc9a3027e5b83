"""`python -m validators static [STACK] [--env PATH] [--targets 12.0a]`: no GPU needed (without
--env: the stack's built env, as `run` takes it).

`python -m validators static [STACK] --lock [LOCK] [--offline]`: the same checks before
install, from byte ranges of the locked wheels (the stack's lock unless LOCK is given).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stackgate.cli_hint import cli_command
from stackgate.cli_numbers import WORKERS
from stackgate.cli_paths import FOLDER
from stackgate.errors import BadInput
from stackgate.heartbeat import Heartbeat, took
from stackgate.http_limits import Limits, add_limit_arguments, limits_from
from stackgate.layout import current_env, lock_files_of
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err
from stackgate.settings import switch
from validators.commands._common import env_path, finish_results
from validators.core.pipeline import apply_accepted
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static, targets_from

if TYPE_CHECKING:
    from stackgate.manifest import Manifest

NAME = "static"
HELP = "ABI, GPU-arch and distribution checks on an installed environment or a lock (no GPU needed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", nargs="?", help="stack name or manifest (pins, lock, targets)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--env",
        help="the environment to check (a venv folder; default: the stack's built env, "
        "<venv root>/<stack>/current, as `run` takes it)",
    )
    where.add_argument(
        "--lock",
        nargs="?",
        const="",
        metavar="UV_LOCK",
        help="check a uv.lock before install, reading byte ranges of its wheels "
        "(default: the stack's lock)",
    )
    parser.add_argument(
        "--targets", action="append", help="GPU archs, e.g. 12.0a (repeat or comma)"
    )
    parser.add_argument(
        "--offline", action="store_true", help="with --lock: use the facts cache only, no network"
    )
    parser.add_argument(
        "--allow-local-urls",
        action="store_true",
        help="with --lock and no stack: fetch URLs that lead to this host (loopback, "
        "link-local, file:), e.g. a mirror served here; refused by default",
    )
    parser.add_argument(
        "--cache",
        type=FOLDER,
        help="with --lock: facts cache folder (default $STACKGATE_CACHE/lockcheck or "
        "~/.cache/stackgate/lockcheck)",
    )
    parser.add_argument(
        "--jobs", type=WORKERS, default=6, help="with --lock: members fetched at once (default 6)"
    )
    add_limit_arguments(parser, "with --lock: ")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="load every extension module for real (child processes, no GPU needed), "
        "not only the modules a static finding is about",
    )
    parser.add_argument(
        "--no-confirm",
        action="store_true",
        help="do not confirm findings by loading the modules (static evidence only)",
    )


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    loaded = load_stack(args.stack) if args.stack else None
    manifest = loaded.manifest if loaded else None
    # The stack's own lock: beside its manifest (stackgate.layout.lock_files_of).
    own_lock = lock_files_of(loaded.path, loaded.manifest.name).lockfile if loaded else None
    if args.lock is not None:
        return _run_lock(args, manifest, own_lock)
    if args.offline:
        raise BadInput("--offline: only with --lock")
    given = env_path(args.env)
    path = given if given is not None else _built_env(manifest)
    results = run_static(
        StaticInputs(
            env_path=path,
            stack=manifest.name if manifest else None,
            manifest=manifest,
            lock=own_lock,
            targets=targets_from(args.targets, manifest),
            abi=AbiOptions(confirm=not args.no_confirm, deep=args.deep),
            cache=FileFactsCache.default(),
        )
    )
    if manifest is not None:
        results = apply_accepted(
            results,
            manifest.validation.accepted_findings,
            manifest.validation.refused_findings,
        )
    return finish_results(results, f"static checks: {path}", args, started)


def _built_env(manifest: Manifest | None) -> Path:
    """The stack's selected env (stackgate.layout) when neither --env nor --lock is given."""
    if manifest is None:
        raise BadInput("static: give --env PATH, --lock [UV_LOCK] or a stack that has been built")
    current = current_env(manifest.name)
    if not current.exists():
        raise BadInput(
            f"no --env given and no built environment at {current}",
            details=[
                f"build it first: {cli_command(['build', manifest.name])}   (or pass --env PATH)"
            ],
        )
    return current


def _lock_to_check(args: argparse.Namespace, own_lock: Path | None) -> Path:
    """--lock, else the stack's own lock; either way a file that exists."""
    if args.lock:
        lock = Path(args.lock)
    elif own_lock is not None:
        lock = own_lock
    else:
        raise BadInput("--lock: give a uv.lock path or a stack")
    if not lock.is_file():
        first = cli_command(["lock", args.stack] if args.stack else "lock STACK")
        raise BadInput(f"--lock {lock}: no such file (run `{first}` first)")
    return lock


def _refuse_this_host(lock: Path, urls: list[str], limits: Limits) -> Limits:
    """No stack names the indexes: the lock alone says where to go, so it may not send this
    check to this host's own services (stackgate/url_targets.py), nor may any redirect hop."""
    from stackgate.url_targets import refused_urls

    local = refused_urls(urls)
    if local:
        raise BadInput(
            f"--lock {lock}: {len(local)} URL(s) lead to this host; refusing to fetch them",
            details=[*local, "--allow-local-urls fetches them (a mirror served here)"],
        )
    return dataclasses.replace(limits, refuse_local_targets=True)


def _run_lock(args: argparse.Namespace, manifest: object, own_lock: Path | None) -> int:
    from stackgate.lock.wheels import LockError, read_lock
    from stackgate.manifest import Manifest
    from validators.elf.facts_cache import FactsCache, default_root
    from validators.lockcheck.check import LockInputs, find_interpreter, run_lock_check
    from validators.lockcheck.origin import check_lock_origin, origin_result

    assert manifest is None or isinstance(manifest, Manifest)
    lock = _lock_to_check(args, own_lock)
    if args.jobs < 1:
        raise BadInput(f"--jobs {args.jobs}: must be >= 1")
    try:
        limits = limits_from(args)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    # Where the lock's files come from, checked before any of them is fetched (the stack's
    # manifest names the indexes); the lock is read once, for this and for its wheels.
    origin = check_lock_origin(lock, manifest, limits, offline=args.offline)
    limits = origin.limits
    try:
        wheels = read_lock(lock, parsed=origin.lock)
    except LockError as exc:
        raise BadInput(str(exc)) from None
    if manifest is None and not args.offline and not args.allow_local_urls:
        limits = _refuse_this_host(lock, [w.url for w in wheels.wheels], limits)
    cache = FactsCache(Path(args.cache) if args.cache else default_root())
    err = console_err()
    verbose = switch("STACKGATE_VERBOSE")
    seen = {"listed": 0, "read": 0}

    def progress(message: str) -> None:
        word = message.split(" ", 1)[0]
        if word in seen:
            seen[word] += 1
        if verbose:
            beat.touched()
            err.print(message, highlight=False, markup=False)

    def status(seconds: float) -> str:
        return (
            f"static --lock: still reading the locked wheels by byte ranges "
            f"({took(seconds)}): {seen['listed']}/{len(wheels.wheels)} wheels listed, "
            f"{seen['read']} objects read"
        )

    beat = Heartbeat(lambda line: err.print(line, highlight=False, markup=False), status)
    with beat:
        results, _report = run_lock_check(
            LockInputs(
                lock=lock,
                wheels=wheels,
                cache=cache,
                offline=args.offline,
                jobs=args.jobs,
                manifest=manifest,
                targets=targets_from(args.targets, manifest),
                interpreter=find_interpreter(wheels.python),
                limits=limits,
                memo=True,
            ),
            progress=progress,
        )
    results = [origin_result(origin, manifest, args.offline), *results]
    if manifest is not None:
        results = apply_accepted(
            results,
            manifest.validation.accepted_findings,
            manifest.validation.refused_findings,
        )
    return finish_results(results, f"static checks before install: {lock}", args)
