"""`fleet submit|node|status|collect|verdict`: validate a stack on many nodes through Slurm or
Kubernetes and read one verdict per node (docs/fleet.md).

submit   write the job folder and submit (Slurm: array + afterany collector; Kubernetes:
         Indexed Job + collector Job); --dry-run prints exactly that and touches nothing
node     the per-node step the scheduler runs (build, N runs, mark-good, status.json)
status   what each node reported so far, and what the scheduler says about each element
collect  import every node's record into the team's store, write verdict.json, print it
verdict  print the verdict from the job folder (no import)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS, int_in
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.output import console_err, styled
from stackgate.safe_text import for_terminal
from validators.fleet.elements import learn, read_submission
from validators.fleet.node import exit_code_for, run_node
from validators.fleet.outliers import LEMON_METRICS, MIN_PEERS
from validators.fleet.render import render_verdict, write_html
from validators.fleet.schedulers import SCHEDULERS, scheduler_of
from validators.fleet.spec import NON_ROOT_UID, SPEC_FILENAME, FleetSpec, read_spec
from validators.fleet.status import read_node, status_summary
from validators.fleet.submit import (
    SubmitRequest,
    execute,
    plan,
    spec_from_request,
    with_available_nodes,
)
from validators.fleet.verdict import FleetVerdict, Judged, judge, write_verdict
from validators.gate.policy import DEFAULT_REPEATS
from validators.records.model import Record, StoredBody
from validators.records.store import RecordStore

VERDICT_HTML = "verdict.html"

NAME = "fleet"
HELP = "validate a stack on many nodes via Slurm or Kubernetes; one verdict per node"


def _sub(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_: str
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_, description=help_)
    # Accept --json/--debug after the action too; SUPPRESS keeps the parent's value otherwise.
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    return parser


def _job_dir_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job-dir", type=Path, required=True, help="the fleet run's folder")
    parser.add_argument(
        "--spec", type=Path, default=None, help=f"the spec (default JOB_DIR/{SPEC_FILENAME})"
    )


def _submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    p.add_argument("--wheelhouse", required=True, help="`builder wheelhouse` folder (shared)")
    p.add_argument("--nodes", action="append", required=True, help="node names: a,b or gpu[01-16]")
    p.add_argument(
        "--jobs-root", type=FOLDER, required=True, help="shared folder; the job folder goes below"
    )
    p.add_argument(
        "--local-root",
        default="/var/tmp/stackgate",
        help="node-local folder for envs ({node} is replaced by the node name)",
    )
    p.add_argument("--runs", type=RUNS, default=DEFAULT_REPEATS, help="validation runs per node")
    p.add_argument("--only", nargs="+", metavar="GROUP", help="validator groups to run")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a group option for the nodes' runs (every KEY: stackgate run --help)",
    )
    p.add_argument("--allow-host-mismatch", action="store_true", help="test stands only")
    p.add_argument("--store", default=None, help="the team's store the collector imports into")
    p.add_argument("--checkout", default=None, help="stackgate checkout on the nodes")
    p.add_argument("--python", default=None, help="interpreter on the nodes (default: this one)")
    p.add_argument("--build-python", default=None, help="`builder build --python` on the nodes")
    p.add_argument("--fleet-id", default=None, help="default <stack>-<UTC time>-<random>")
    p.add_argument("--scheduler", choices=list(SCHEDULERS), default="slurm")
    p.add_argument(
        "--throttle", type=int_in(1, 1_000_000), default=None, help="nodes at once (Slurm %%K)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be submitted")
    s = p.add_argument_group("slurm")
    s.add_argument("--partition")
    s.add_argument("--collect-partition")
    s.add_argument("--time", help="time limit of one element")
    s.add_argument("--gres", help="e.g. gpu:8")
    s.add_argument("--account")
    s.add_argument("--no-pin", action="store_true", help="let Slurm place the elements")
    s.add_argument(
        "--pin-with",
        choices=["auto", "libslurm", "scontrol"],
        default="auto",
        help="libslurm: one update RPC per element through a helper built against the host's "
        "Slurm headers; scontrol: two RPCs per element; auto (default): libslurm where the "
        "helper builds, else scontrol",
    )
    s.add_argument(
        "--cc",
        metavar="PATH",
        help="the C compiler for the libslurm pin helper, an absolute path (default: the first "
        "of /usr/bin/cc, /usr/bin/gcc, /usr/bin/clang; PATH is never searched)",
    )
    k = p.add_argument_group("kubernetes")
    k.add_argument("--image", help="the stackgate image, by digest")
    k.add_argument("--namespace", default="default")
    k.add_argument("--gpus", type=int_in(0, 64), default=8, help="nvidia.com/gpu per pod")
    k.add_argument("--claim", default="stackgate-fleet", help="ReadWriteMany claim")
    k.add_argument("--claim-mount", default="/fleet")
    k.add_argument(
        "--host-path", default="/var/lib/stackgate", help="node-local hostPath ('': emptyDir)"
    )
    k.add_argument(
        "--node-deadline", type=int_in(1, 30 * 86_400), default=6 * 3600, help="seconds per pod"
    )
    k.add_argument("--priority-class", default=None, help="priorityClassName of the pods")
    k.add_argument(
        "--run-as-user",
        type=int_in(1, 2**31 - 1),
        default=NON_ROOT_UID,
        help="uid (and gid, fsGroup) of every container: never root (Pod Security restricted)",
    )


def _lemon_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lemon-metric",
        action="append",
        default=None,
        metavar="PATTERN",
        help=f"metrics judged for lemons (fnmatch; default {' '.join(LEMON_METRICS)})",
    )
    parser.add_argument(
        "--min-peers",
        type=int_in(1, 1_000_000),
        default=MIN_PEERS,
        help="class size needed to call a lemon",
    )
    parser.add_argument(
        "--html", type=OUTPUT_FILE, default=None, metavar="FILE", help="also write the verdict page"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _submit_args(_sub(sub, "submit", "submit the per-node jobs and the collector"))
    node = _sub(sub, "node", "the per-node step (run by the scheduler)")
    _job_dir_args(node)
    node.add_argument(
        "--index", type=int_in(0, 10_000_000), default=None, help="default $JOB_COMPLETION_INDEX"
    )
    node.add_argument("--node", default=None, help="default $STACKGATE_HOSTNAME / Slurm's")
    node.add_argument(
        "--exit-zero", action="store_true", help="exit 0 once status.json is written (k8s)"
    )
    _job_dir_args(_sub(sub, "status", "what the nodes and the scheduler say so far"))
    collect = _sub(sub, "collect", "import the nodes' records; write and print the verdict")
    _job_dir_args(collect)
    collect.add_argument("--store", type=Path, default=None, help="default: the spec's store")
    _lemon_args(collect)
    verdict = _sub(sub, "verdict", "print the verdict from the job folder")
    _job_dir_args(verdict)
    _lemon_args(verdict)


def _spec(args: argparse.Namespace) -> FleetSpec:
    path: Path = args.spec or args.job_dir / SPEC_FILENAME
    spec = read_spec(path)
    if Path(spec.job_dir).resolve() != args.job_dir.resolve():
        spec = spec.model_copy(update={"job_dir": str(args.job_dir)})
    return spec


def submit_request(args: argparse.Namespace) -> SubmitRequest:
    """The typed request of `fleet submit`'s flags (the library never sees argparse)."""
    return SubmitRequest(
        stack=args.stack,
        wheelhouse=args.wheelhouse,
        nodes=args.nodes,
        jobs_root=str(args.jobs_root),
        local_root=args.local_root,
        runs=args.runs,
        only=args.only or [],
        options=args.option,
        allow_host_mismatch=args.allow_host_mismatch,
        store=args.store,
        checkout=args.checkout,
        python=args.python,
        build_python=args.build_python,
        fleet_id=args.fleet_id,
        scheduler=args.scheduler,
        throttle=args.throttle,
        partition=args.partition,
        collect_partition=args.collect_partition,
        time=args.time,
        gres=args.gres,
        account=args.account,
        pin=not args.no_pin,
        pin_with=args.pin_with,
        cc=args.cc,
        image=args.image,
        namespace=args.namespace,
        gpus=args.gpus,
        claim=args.claim,
        claim_mount=args.claim_mount,
        host_path=args.host_path,
        node_deadline_s=args.node_deadline,
        priority_class=args.priority_class,
        run_as_user=args.run_as_user,
    )


def _submit(args: argparse.Namespace) -> int:
    spec = with_available_nodes(spec_from_request(submit_request(args)), dry_run=args.dry_run)
    planned = plan(spec, max_array=scheduler_of(spec).array_limit())
    console = console_err()
    if args.dry_run:
        if args.json:
            emit_json({"ok": True, "dry_run": True, **planned.as_json()})
        else:
            for rel, text in planned.files.items():
                print(for_terminal(f"# ===== {planned.spec.job_dir}/{rel}"))
                print(for_terminal(text), end="" if text.endswith("\n") else "\n")
            print("# ===== commands")
            for argv in planned.commands:
                print(for_terminal(" ".join(argv)))
            sys.stdout.flush()
        console.print(
            styled(
                "[bold green]OK[/] {}",
                f"fleet {planned.spec.fleet_id} dry run: {len(planned.spec.targets)} node(s) "
                f"for {planned.spec.scheduler}, {len(planned.files)} file(s) and "
                f"{len(planned.commands)} command(s) printed on stdout; nothing submitted",
            )
        )
        return EXIT_OK
    submitted = execute(planned)
    if args.json:
        emit_json(
            {
                "ok": True,
                **planned.as_json(),
                "submitted": submitted.model_dump(mode="json", exclude_unset=True),
            }
        )
    for node, why in planned.spec.skipped.items():
        console.print(styled("  [yellow]{}[/]: {}", node, why))
    if submitted.arrays:
        console.print(f"  array job(s): {', '.join(submitted.arrays)}", highlight=False)
    if submitted.collector_job:
        console.print(f"  collector job: {submitted.collector_job}", highlight=False)
    console.print(
        styled(
            "[bold green]OK[/] fleet {}: {}",
            planned.spec.fleet_id,
            f"{len(planned.spec.targets)} node(s) submitted "
            f"to {planned.spec.scheduler}; job folder {planned.spec.job_dir}",
        )
    )
    return EXIT_OK


def _node(args: argparse.Namespace) -> int:
    spec = _spec(args)
    index = args.index
    if index is None and os.environ.get("JOB_COMPLETION_INDEX", "").isdigit():
        index = int(os.environ["JOB_COMPLETION_INDEX"])
    if index is not None and not 0 <= index < len(spec.targets):
        raise BadInput(f"--index {index}: the spec submitted {len(spec.targets)} node(s)")
    copy = spec.folder / SPEC_FILENAME  # Kubernetes passes the spec in a ConfigMap
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(spec.to_json(), encoding="utf-8")
    status = run_node(spec, index, args.node)
    if args.json:
        emit_json(status.model_dump(mode="json"))
    console_err().print(
        f"node {status.node}: {status.outcome} ({status.phase}) " + "; ".join(status.reasons[:3]),
        highlight=False,
        markup=False,
    )
    return EXIT_OK if args.exit_zero else exit_code_for(status)


def _status(args: argparse.Namespace) -> int:
    spec = _spec(args)
    elements = learn(spec, read_submission(spec.folder))
    rows = []
    for node in spec.nodes:
        element = elements.get(node)
        row = {"node": node, **status_summary(read_node(spec.folder, node))}
        row["scheduler"] = element.note() if element else spec.skipped.get(node)
        rows.append(row)
    if args.json:
        emit_json({"fleet_id": spec.fleet_id, "nodes": rows})
    console = console_err()
    for row in rows:
        console.print(
            f"{row['node']}: {row['reported'] or 'not reported'}"
            + (f" ({row['phase']})" if row["phase"] else "")
            + (f": {row['problem']}" if row.get("problem") else "")
            + (f"  [{row['scheduler']}]" if row["scheduler"] else ""),
            highlight=False,
            markup=False,
        )
    reported = sum(1 for row in rows if row["reported"])
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"fleet {spec.fleet_id}: {reported} of {len(rows)} node(s) reported so far",
        )
    )
    return EXIT_OK


def _finish(verdict: FleetVerdict, args: argparse.Namespace, extra: dict[str, object]) -> int:
    if args.html is not None:
        extra = {**extra, "html": str(write_html(args.html, verdict))}
    if args.json:
        emit_json({**verdict.model_dump(mode="json"), **extra, "ok": verdict.ok})
    render_verdict(verdict, console_err())
    return EXIT_OK if verdict.ok else EXIT_CHECK_FAILED


def _judge(args: argparse.Namespace, spec: FleetSpec) -> Judged:
    submission = read_submission(spec.folder)
    return judge(
        spec,
        elements=learn(spec, submission),
        submission=submission,
        patterns=args.lemon_metric or LEMON_METRICS,
        min_peers=args.min_peers,
    )


def _lemon_note(spec: FleetSpec, node: str, verdict: FleetVerdict) -> str:
    [mine] = [n for n in verdict.nodes if n.node == node]
    metrics = ", ".join(f"{m.metric} {m.worse_by_pct:+.1f}%" for m in mine.lemon)
    return f"fleet {spec.fleet_id} node {node}: a lemon ({metrics}); not a baseline"


def _collect(args: argparse.Namespace) -> int:
    """The verdict first (written whatever the store says), then the import: PASS records
    that are no lemon as known-good; a lemon's as a candidate record (kept, never a baseline:
    the gate takes known-good records only), in one transaction. What is imported is each
    record as it was judged (kept from judging, files not read again), so a file changed
    after judging changes nothing; one whose kept copy does not read back is named."""
    spec = _spec(args)
    judged = _judge(args, spec)
    verdict = judged.verdict
    path = write_verdict(spec.folder, verdict)
    html = write_html(spec.folder / VERDICT_HTML, verdict)
    changed: list[str] = []
    lemon_ids: set[str] = set()

    def records() -> Iterator[Record | StoredBody]:
        for lemon, files in ((False, judged.known_good()), (True, judged.lemons())):
            for node in sorted(files):
                kept = judged.read(node) if lemon else judged.row(node)
                if kept is None:
                    changed.append(
                        f"{files[node]}: the judged copy does not read back; not imported"
                    )
                elif isinstance(kept, Record):
                    note = _lemon_note(spec, node, verdict)
                    record = kept.model_copy(update={"kind": "candidate", "note": note}).sealed()
                    lemon_ids.add(record.record_id)
                    yield record
                else:
                    yield kept

    store_path = args.store or (Path(spec.store) if spec.store else None)
    with RecordStore.open(store_path) as store:
        result = store.add_many(records())
        where = store.path
    added = [i for i in result.added if i not in lemon_ids]
    console = console_err()
    for line in changed:
        console.print(line, highlight=False, markup=False)
    console.print(
        f"imported {len(added)} known-good record(s) into {where} ({len(result.present)} "
        f"already there), {len(lemon_ids)} lemon(s) as candidate records; verdict in {path}, "
        f"{html}",
        highlight=False,
        markup=False,
    )
    extra: dict[str, object] = {
        "store": str(where),
        "added": added,
        "present": result.present,
        "lemons_as_candidates": sorted(lemon_ids),
        "not_imported": changed,
    }
    return _finish(verdict, args, extra)


def run(args: argparse.Namespace) -> int:
    if args.action == "submit":
        return _submit(args)
    if args.action == "node":
        return _node(args)
    if args.action == "status":
        return _status(args)
    if args.action == "collect":
        return _collect(args)
    return _finish(_judge(args, _spec(args)).verdict, args, {})
