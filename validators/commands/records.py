"""`records list|show|export|import|verify`: the known-good store and its JSON copies in git."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from stackgate.cli import emit_json
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK
from stackgate.output import console_err
from validators.records.cli_args import add_store_argument
from validators.records.resolve import committed_records_dir, resolve_record
from validators.records.store import RecordStore

NAME = "records"
HELP = "list, show, export (to records/), import and verify known-good records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "show", "export", "import", "verify"])
    parser.add_argument(
        "ref",
        nargs="?",
        default=None,
        help="show: RECORD or STACK; list/export: a stack to limit to",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="export/import folder (default: the project's records/)",
    )
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    console = console_err()
    folder: Path = args.dir or committed_records_dir()
    with RecordStore.open(args.store) as store:
        if args.action == "list":
            records = store.records(args.ref)
            if args.json:
                emit_json(
                    [
                        {
                            "record_id": r.record_id,
                            "stack": r.stack,
                            "kind": r.kind,
                            "created_at": r.created_at,
                            "runs": r.runs,
                            "env_tree_sha256": r.build.env_tree_sha256,
                            "host_mismatch": r.host_mismatch,
                        }
                        for r in records
                    ]
                )
            table = Table(title=f"records in {store.path}")
            for col in (
                "id",
                "stack",
                "kind",
                "created",
                "runs",
                "checks",
                "metrics",
                "GPUs",
                "env tree",
            ):
                table.add_column(col)
            for r in records:
                gpus = f"{r.host.gpu.count}x {r.host.gpu.model or '-'}"
                table.add_row(
                    r.short_id,
                    r.stack,
                    r.kind,
                    r.created_at,
                    str(r.runs),
                    str(len(r.checks)),
                    str(len(r.metrics)),
                    gpus,
                    (r.build.env_tree_sha256 or "-")[:12],
                )
            console.print(table)
            return EXIT_OK
        if args.action == "show":
            record = resolve_record(args.ref or "", store)
            if args.json:
                emit_json(record.model_dump(mode="json"))
            else:
                console.print(record.to_json(), markup=False, highlight=False)
            return EXIT_OK
        if args.action == "export":
            written = store.export(folder, args.ref)
            if args.json:
                emit_json({"ok": True, "written": [str(p) for p in written]})
            console.print(f"exported {len(written)} new record(s) to {folder}")
            for p in written:
                console.print(f"  {p}", highlight=False)
            return EXIT_OK
        if args.action == "import":
            result = store.import_dir(folder)
            if args.json:
                emit_json({"ok": True, "added": result.added, "present": result.present})
            console.print(
                f"imported {len(result.added)} record(s) from {folder}; "
                f"{len(result.present)} already present"
            )
            return EXIT_OK
        problems = store.verify_all()
        count = store.count()
    if args.json:
        emit_json({"ok": not problems, "records": count, "problems": problems})
    if problems:
        console.print(f"[bold red]{len(problems)} corrupt record(s)[/] in {store.path}")
        for problem in problems:
            console.print(f"  - {problem}", markup=False)
        return EXIT_CHECK_FAILED
    console.print(f"[green]ok[/]: {count} record(s) verified in {store.path}")
    return EXIT_OK
