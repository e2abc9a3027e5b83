"""`diff A B`: two stacks or records side by side: versions, env, manifest, host, checks, numbers.

A stack contributes its manifest (pins, env, settings); a record also its host, checks and
metrics. Informational: exit 0 whatever differs (the gate is the command that judges).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from stackgate.cli import emit_json
from stackgate.errors import EXIT_OK
from stackgate.output import console_err, print_table, styled
from validators.gate.compare import gate
from validators.gate.diffs import Change, diff_flat, diff_manifests, diff_versions
from validators.gate.policy import GatePolicy
from validators.gate.tables import changes_table, host_table, metrics_table, print_checks
from validators.records.cli_args import add_store_argument
from validators.records.model import Record
from validators.records.reference import Lookup, Reference, parse_reference
from validators.records.store import RecordStore

NAME = "diff"
HELP = "show how two stacks or records differ (versions, env, manifest, host, results)"


@dataclass
class Side:
    label: str
    manifest: dict[str, object]
    packages: dict[str, str]
    env: dict[str, str]
    record: Record | None = None
    notes: list[str] = field(default_factory=list)


def _side(ref: Reference, lookup: Lookup) -> Side:
    if ref.is_stack:
        loaded = lookup.stack(ref)
        pins = {
            name: pin.version or f"{pin.git}@{pin.ref}"
            for name, pin in loaded.manifest.packages.items()
        }
        return Side(
            label=f"stack {loaded.manifest.name}",
            manifest=loaded.raw,
            packages=pins,
            env=loaded.manifest.env_for(None),
        )
    record = lookup.any_record(ref)
    packages = record.build.packages or {
        str(k): str(v.get("version") if isinstance(v, dict) else v)
        for k, v in record.manifest.get("packages", {}).items()
    }
    return Side(
        label=record.label,
        manifest=record.manifest,
        packages=packages,
        env=record.env,
        record=record,
    )


def _pins_against_record(a: Side, b: Side) -> tuple[list[Change], str | None]:
    """A stack against a record: a stack names only its pins, a record every installed
    version, so the record's other packages are not "added" or "removed": they are compared
    only where the stack pins them, and a note says how many were left out."""
    stack, record_side = (b, a) if a.record is not None else (a, b)
    pinned = {k: v for k, v in record_side.packages.items() if k in stack.packages}
    left_out = len(record_side.packages) - len(pinned)
    sides = (pinned, stack.packages) if stack is b else (stack.packages, pinned)
    note = (
        f"package versions: {stack.label} names only its {len(stack.packages)} pin(s); the "
        f"other {left_out} installed in {record_side.label} are not compared"
        if left_out
        else None
    )
    return diff_flat(*sides), note


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="stack name or RECORD (file or id)")
    parser.add_argument("b", help="stack name or RECORD (file or id)")
    add_store_argument(parser)


def run(args: argparse.Namespace) -> int:
    a_ref, b_ref = parse_reference(args.a), parse_reference(args.b)
    with RecordStore.open(args.store, read_only=True) as store:
        lookup = Lookup(store)
        a, b = _side(a_ref, lookup), _side(b_ref, lookup)
    unknown: str | None = None
    pins_only: str | None = None
    if a.record is not None and b.record is not None:
        # installed versions on both sides, or "unknown" for a run report's side, never the
        # manifest's pins against another side's installed versions
        known = diff_versions(
            a.record.build.packages,
            b.record.build.packages,
            (a.record.build.env_tree_sha256, b.record.build.env_tree_sha256),
        )
        versions: list[Change] = known.changes
        unknown = known.summary({"baseline": a.label, "candidate": b.label})
    elif a.record is not None or b.record is not None:
        versions, pins_only = _pins_against_record(a, b)
    else:
        versions = diff_flat(a.packages, b.packages)
    env = diff_flat(a.env, b.env)
    manifest = diff_manifests(a.manifest, b.manifest)
    console = console_err()
    console.print(styled("[bold]diff[/] {} -> {}", a.label, b.label))
    payload: dict[str, object] = {
        "a": a.label,
        "b": b.label,
        "versions": [c.model_dump() for c in versions],
        "versions_unknown": unknown,
        "versions_pins_only": pins_only,
        "env": [c.model_dump() for c in env],
        "manifest": [c.model_dump() for c in manifest],
    }
    for note in (unknown, pins_only):
        if note:
            console.print(note, markup=False, highlight=False)
    for title, changes in (
        ("package versions", [] if unknown else versions),
        ("environment variables", env),
        ("manifest", manifest),
    ):
        if changes:
            print_table(console, changes_table(title, changes))
        elif not (unknown and title == "package versions"):
            console.print(f"{title}: same")
    if a.record is not None and b.record is not None:
        # The gate's comparison for a record pair, shown, not judged.
        result = gate(a.record, b.record, GatePolicy(min_repeats=2))
        if result.host:
            print_table(console, host_table(result))
        print_checks(console, result, show_ok=False)
        if result.metrics:
            print_table(console, metrics_table(result))
        payload["host"] = [h.model_dump() for h in result.host]
        payload["checks"] = [c.model_dump() for c in result.checks]
        payload["metrics"] = [m.model_dump() for m in result.metrics]
    elif a.record is not None or b.record is not None:
        console.print("one side is a stack (no results): only the manifest sides compared")
    if args.json:
        emit_json(payload)
    # Versions a record could not list are not counted as the same: the count says so.
    counted = (
        "package versions unknown"
        if unknown
        else f"{len(versions)} pinned package version(s)"
        if pins_only
        else f"{len(versions)} package version(s)"
    )
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"diff {a.label} -> {b.label}: {counted}, {len(env)} "
            f"environment variable(s), {len(manifest)} manifest value(s) differ",
        )
    )
    return EXIT_OK
