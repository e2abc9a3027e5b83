"""`records list|show|export|import|verify`: the known-good store and its JSON copies in git.

Only `import` writes to the store; the others open it read-only (a shared store on a
read-only mount works). `list` shows one page, newest first (`--limit`, `--offset`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.table import Table

from stackgate.cli import emit_json
from stackgate.cli_hint import cli_command
from stackgate.cli_numbers import int_in
from stackgate.cli_paths import FOLDER
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.output import console_err, print_table, styled
from stackgate.paths import display_path
from stackgate.safe_text import for_terminal
from validators.records.cli_args import add_store_argument
from validators.records.json_files import (
    export_records,
    exported_heads,
    import_dir,
    import_record_files,
    missing_committed,
    verify_files,
)
from validators.records.model import Record
from validators.records.resolve import committed_records_dir, resolve_record
from validators.records.store import RecordStore, Verification

NAME = "records"
HELP = "list, show, export (to records/), import and verify known-good records"
DEFAULT_PAGE = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "show", "export", "import", "verify"])
    parser.add_argument(
        "ref",
        nargs="?",
        default=None,
        help="show: RECORD or STACK; list/export: a stack to limit to; import: a record file "
        "or folder (default --dir)",
    )
    parser.add_argument(
        "--dir",
        type=FOLDER,
        default=None,
        help="export/import folder, and where verify looks for the exported store head "
        "(default: the project's records/)",
    )
    parser.add_argument(
        "--limit",
        type=int_in(0, 1_000_000),
        default=DEFAULT_PAGE,
        help=f"list: records per page, newest first (default {DEFAULT_PAGE}; 0: all)",
    )
    parser.add_argument(
        "--offset", type=int_in(0, 1 << 62), default=0, help="list: records to skip"
    )
    parser.add_argument("--kind", choices=["known-good", "candidate"], default=None)
    add_store_argument(parser)


def _summary(r: Record) -> dict[str, object]:
    return {
        "record_id": r.record_id,
        "stack": r.stack,
        "kind": r.kind,
        "created_at": r.created_at,
        "runs": r.runs,
        "env_tree_sha256": r.build.env_tree_sha256,
        "host_mismatch": r.host_mismatch,
    }


def _list(args: argparse.Namespace, store: RecordStore) -> int:
    if args.limit < 0 or args.offset < 0:
        raise BadInput("--limit and --offset must be >= 0")
    total = store.count(args.ref, args.kind)
    page = store.iter_records(
        args.ref, args.kind, newest_first=True, limit=args.limit or None, offset=args.offset
    )
    if args.json:
        emit_json([_summary(r) for r in page])  # the page; the total is in `records verify`
        return EXIT_OK
    if total == 0:
        what = f"for '{args.ref}' " if args.ref else ""
        console = console_err()
        console.print(
            f"make one: {cli_command('mark-good STACK --env ENV')}; or import the committed "
            f"ones: {cli_command(['records', 'import', display_path(committed_records_dir())])}",
            markup=False,
            highlight=False,
        )
        console.print(styled("[bold green]OK[/] {}", f"no records {what}in {store.path}"))
        return EXIT_OK
    table = Table(title=f"records in {store.path}")
    for col in ("id", "stack", "kind", "created", "runs", "checks", "metrics", "GPUs", "env tree"):
        table.add_column(col)
    shown = 0
    for r in page:
        shown += 1
        table.add_row(
            r.short_id,
            r.stack,
            r.kind,
            r.created_at,
            str(r.runs),
            str(len(r.checks)),
            str(len(r.metrics)),
            f"{r.host.gpu.count}x {r.host.gpu.model or '-'}",
            (r.build.env_tree_sha256 or "-")[:12],
        )
    console = console_err()
    print_table(console, table)
    first = args.offset + 1 if shown else args.offset
    more = f" (--offset {args.offset + shown} for more, --limit 0 for all)" if shown < total else ""
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"records {first}-{args.offset + shown} of {total} in {store.path}, newest first{more}",
        )
    )
    return EXIT_OK


def _judge_unmatched_heads(result: Verification, store: RecordStore, folder: Path) -> None:
    """A committed head of another store that this store does not extend: fine (a note) for a
    teammate's store whose records were imported here, tampering (a problem) when the store was
    re-created without records that were committed."""
    lacking, first = missing_committed(store, folder)
    for source, head in result.unmatched_heads:
        if lacking:
            result.problems.append(
                f"{source} commits a head of {head.count} record(s) that this store does "
                f"not extend, and the store lacks {lacking} committed record(s) "
                f"({', '.join(first)}): re-created without them, or never imported "
                "(records import --dir)"
            )
        else:
            result.notes.append(
                f"{source}: another store's head; every committed record is in this store"
            )


def _verify(args: argparse.Namespace, store: RecordStore, folder: Path) -> int:
    result = store.verify(exported_heads(folder, store))
    files, file_problems = verify_files(folder) if folder.is_dir() else (0, [])
    if result.unmatched_heads and folder.is_dir():
        _judge_unmatched_heads(result, store, folder)
    console = console_err()
    # A store that is not there verifies nothing: "ok: 0 records (hash chain intact)" read as a
    # pass for a mistyped --store or a deleted one. Record files alone can still be verified
    # (a records repository's CI has no store); with neither, nothing was checked.
    has_store = store.path.is_file()
    nothing = not has_store and files == 0
    if args.json:
        emit_json(
            {
                "ok": not result.problems and not file_problems and not nothing,
                "store_exists": has_store,
                "records": result.count,
                "problems": result.problems,
                "files": files,
                "file_problems": file_problems,
                "notes": result.notes,
            }
        )
    if result.problems:
        console.print(
            styled(
                "[bold red]tampered store[/] {}: {} problem(s)", store.path, len(result.problems)
            )
        )
        for problem in result.problems:
            console.print(f"  - {problem}", markup=False)
    if file_problems:
        console.print(
            styled("[bold red]{} bad record file(s)[/] in {}", len(file_problems), folder)
        )
        for problem in file_problems:
            console.print(f"  - {problem}", markup=False)
    if result.problems or file_problems:
        console.print(
            styled(
                "[bold red]FAILED[/] {}",
                f"records verify: {len(result.problems)} store problem(s), "
                f"{len(file_problems)} bad record file(s) above",
            )
        )
        return EXIT_CHECK_FAILED
    if nothing:
        console.print(
            styled(
                "[bold red]FAILED[/] nothing verified: no record store at {} and no record files "
                "in {}",
                store.path,
                folder,
            )
        )
        return EXIT_CHECK_FAILED
    if not has_store:
        console.print(
            styled(
                "[bold green]OK[/] {} record file(s) verified in {}; no record store at {} "
                "(not verified)",
                files,
                folder,
                store.path,
            )
        )
        return EXIT_OK
    for note in result.notes:
        console.print(f"  {note}", markup=False, highlight=False)
    console.print(
        styled(
            "[bold green]OK[/] {} record(s) verified in {} (hash chain intact){}",
            result.count,
            store.path,
            f"; {files} record file(s) verified in {folder}" if files else "",
        )
    )
    return EXIT_OK


def _import_sources(args: argparse.Namespace, folder: Path) -> tuple[Path, list[Path]]:
    """What `records import` reads: (the folder, the named record files). `records import FILE`
    imports FILE (a folder: every record in it), never --dir."""
    named: list[Path] = []
    if args.ref:
        target = Path(args.ref)
        if target.is_dir() and target.suffix == ".json":
            # "imported 0 record(s)" with exit 0 for what was meant as a file
            raise BadInput(f"records import {target}: a folder, not a record file")
        if target.is_dir():
            folder = target
        elif target.exists():
            named = [target]
        else:
            raise BadInput(f"records import {target}: no such file or folder")
    if not named and not folder.is_dir():
        # "imported 0" with exit 0 read as success for a mistyped folder
        what = "not a folder" if folder.exists() else "no such folder"
        raise BadInput(f"records import --dir {folder}: {what}")
    return folder, named


def _show(args: argparse.Namespace, store: RecordStore) -> int:
    record = resolve_record(args.ref or "", store)
    if args.json:  # the whole record (thousands of lines for a served stack)
        emit_json(record.model_dump(mode="json"))
        return EXIT_OK
    # What was asked for: a summary on stdout; the verdict line: stderr.
    # A record's note and labels are untrusted text: shown, never obeyed, secrets hidden.
    sys.stdout.write(for_terminal("\n".join(record_summary(record))) + "\n")
    sys.stdout.flush()
    console_err().print(
        styled(
            "[bold green]OK[/] {}",
            f"{record.label}: summary printed on stdout (the whole record: "
            f"{cli_command(['records', 'show', record.record_id, '--json'])})",
        )
    )
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    console = console_err()
    folder: Path = args.dir or committed_records_dir()
    if args.ref and args.action == "verify":
        raise BadInput(f"records verify takes no RECORD ({args.ref!r}); --dir names the folder")
    folder, named = _import_sources(args, folder) if args.action == "import" else (folder, [])
    reads = args.action in ("list", "show", "export")
    if reads and args.store is not None and not args.store.exists():
        # "no records in X" with exit 0 read as an empty store for a mistyped --store
        raise BadInput(
            f"records {args.action} --store {args.store}: no such file",
            details=["a store is made by `mark-good` or `records import`"],
        )
    with RecordStore.open(args.store, read_only=args.action != "import") as store:
        for note in store.notes:
            console.print(styled("[bold yellow]note[/]: {}", note))
        if args.action == "list":
            return _list(args, store)
        if args.action == "verify":
            return _verify(args, store, folder)
        if args.action == "show":
            return _show(args, store)
        if args.action == "export":
            done = export_records(store, folder, args.ref)
            if args.json:
                emit_json(
                    {
                        "ok": True,
                        "written": [str(p) for p in done.written],
                        "repaired": [str(p) for p in done.repaired],
                        "unchanged": done.unchanged,
                        "head": str(done.head) if done.head else None,
                    }
                )
            for p in [*done.written, *done.repaired]:
                console.print(f"  {p}", markup=False, highlight=False)
            console.print(
                styled(
                    "[bold green]OK[/] {}",
                    f"exported {len(done.written)} new record(s) to {folder}; repaired "
                    f"{len(done.repaired)}; {done.unchanged} already there",
                )
            )
            return EXIT_OK
        result = import_record_files(store, named) if named else import_dir(store, folder)
        folder = named[0] if named else folder
    if args.json:
        emit_json(
            {
                "ok": True,
                "added": result.added,
                "present": result.present,
                "skipped": result.skipped,
            }
        )
    for why in result.skipped:
        console.print(styled("[bold yellow]warning[/]: skipped {}", why))
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"imported {len(result.added)} record(s) from {folder}; "
            f"{len(result.present)} already present",
        )
    )
    return EXIT_OK


def record_summary(record: Record) -> list[str]:
    """What a person reads first: what, when, where, what was checked and measured."""
    counts: dict[str, int] = {}
    for r in record.checks:
        counts[r.status] = counts.get(r.status, 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    gpu = record.host.gpu
    metrics = sorted(record.metrics)
    shown = ", ".join(metrics[:8]) + (f" ... ({len(metrics)} in all)" if len(metrics) > 8 else "")
    return [
        f"record   {record.label} ({record.kind})",
        f"id       {record.record_id}",
        f"created  {record.created_at} by stackgate {record.stackgate_version}",
        f"host     {gpu.count}x {gpu.model or '-'}",
        f"env tree {(record.build.env_tree_sha256 or '-')[:12]}",
        f"runs     {record.runs}",
        f"checks   {len(record.checks)}: {statuses}",
        f"metrics  {shown or 'none'}",
        *([f"note     {record.note}"] if record.note else []),
    ]
