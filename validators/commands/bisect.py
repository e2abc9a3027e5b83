"""`bisect --good BASELINE --bad CANDIDATE`: the change units of a regressing upgrade that
caused the regression, found by building and gating intermediate stacks (docs/bisect.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from stackgate.cli import emit_json
from stackgate.cli_hint import cli_command
from stackgate.cli_numbers import RUNS, int_in
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.layout import current_env, lock_files, lock_files_of, venv_root
from stackgate.lock.state import read_lock
from stackgate.output import console_err
from stackgate.python_finder import find_python
from validators.bisect.answer import payload, render_text, write_html
from validators.bisect.intermediate import Sides
from validators.bisect.refused import Refusal, check_refusal, is_gate_output, read_refusal
from validators.bisect.search import MODES
from validators.bisect.session import Bisect, Settings
from validators.bisect.units import ChangeUnit, change_units
from validators.gate.cli_args import add_policy_arguments, flags_from
from validators.gate.stack_policy import decide, require_interleave, stack_gate, under_baseline
from validators.records.cli_args import add_store_argument
from validators.records.env_verify import recheck_env
from validators.records.model import Record
from validators.records.reference import Lookup
from validators.records.store import RecordStore, default_store_path

NAME = "bisect"
HELP = "name the change(s) of a regressing upgrade that caused the regression"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--good", required=True, help="known-good record (file or id) or stack")
    parser.add_argument(
        "--bad",
        required=True,
        help="candidate stack (name or manifest), or the --json output of the gate that "
        "refused it (GATE.json: its verdict is the whole candidate's, no gate spent on it)",
    )
    parser.add_argument(
        "--good-env",
        type=Path,
        default=None,
        help="the baseline record's env, re-measured beside each step (default: the baseline "
        "stack's current env)",
    )
    parser.add_argument(
        "--search",
        choices=MODES,
        default="interaction",
        help="binary: git bisect, one culprit, ceil(log2 units)+1 gates; interaction "
        "(default): also finds units that regress only together and further culprits",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="PATTERN",
        help="the regression to bisect: gate metric keys (fnmatch, repeatable); a step "
        "regresses on a failing check or one of these (default: any failing metric)",
    )
    parser.add_argument("--max-gates", type=int_in(1, 10_000), default=None)
    parser.add_argument("--max-builds", type=int_in(1, 10_000), default=None)
    parser.add_argument(
        "--no-interleave",
        action="store_true",
        help="gate each step against the record's numbers instead of re-measuring the "
        "baseline beside it (refused when the stack's policy says interleave = true)",
    )
    parser.add_argument(
        "--repeats",
        type=RUNS,
        default=None,
        help="runs (ABBA pairs) per gate (default: the baseline stack's [validation.gate])",
    )
    parser.add_argument(
        "--work",
        type=FOLDER,
        default=None,
        help="state folder: intermediate manifests, locks, gate results, steps.json "
        "(default: <state dir>/bisect/<id of this bisect>; a re-run continues from it)",
    )
    parser.add_argument("--venv-root", type=FOLDER, default=None, help="where steps are built")
    parser.add_argument("--python", default=None, help="interpreter for locks and builds")
    parser.add_argument("--html", type=OUTPUT_FILE, default=None, help="also write an HTML report")
    parser.add_argument(
        "--keep-runs", action="store_true", help="keep every validation run under WORK/runs/"
    )
    add_policy_arguments(parser)
    add_store_argument(parser)


def _baseline(args: argparse.Namespace, lookup: Lookup) -> Record:
    baseline = lookup.record(args.good)
    if baseline.kind != "known-good":
        raise BadInput(
            f"--good {args.good}: {baseline.label} is a {baseline.kind} record, not "
            f"known-good (mark it good first: {cli_command('mark-good STACK --env ENV')})"
        )
    return baseline


def _sides(baseline: Record, bad: str, lookup: Lookup) -> Sides:
    base = lookup.stack(baseline.stack)
    base_state = read_lock(base, lock_files_of(base.path, base.manifest.name))
    recorded = baseline.build.lock_sha256
    if recorded is not None and recorded != base_state.lock_hash:
        raise BadInput(
            f"{base_state.files.lockfile} is not the lock {baseline.label} was built from "
            f"(lock {base_state.lock_hash[:12]}, recorded {recorded[:12]}); check out the "
            "baseline's lock or give the record that matches it"
        )
    cand = lookup.stack(bad)
    cand_state = read_lock(cand, lock_files_of(cand.path, cand.manifest.name))
    return Sides(base, cand, base_state.lock, cand_state.lock, base_state.files.lockfile)


def _work(args: argparse.Namespace, baseline: Record, sides: Sides, policy: object) -> Path:
    if args.work is not None:
        return Path(args.work).absolute()
    ident = json.dumps(
        [baseline.record_id, sides.cand.path.read_text(), sides.cand_lock.model_dump_json(),
         repr(policy), sorted(args.metric), not args.no_interleave],
        default=str,
    )  # fmt: skip
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return (args.store or default_store_path()).parent / "bisect" / key


def prepare(
    args: argparse.Namespace, lookup: Lookup
) -> tuple[Bisect, list[ChangeUnit], Refusal | None]:
    """Everything before the first lock: the baseline, both sides, the policy, the units.
    Each manifest and record is read once (`lookup`: its counters say so in the tests)."""
    baseline = _baseline(args, lookup)
    refusal = read_refusal(Path(args.bad)) if is_gate_output(args.bad) else None
    sides = _sides(baseline, refusal.stack if refusal is not None else args.bad, lookup)
    if refusal is not None:
        check_refusal(refusal, baseline.label, sides.cand_lock, lock_files(refusal.stack).lockfile)
    declared = stack_gate(baseline.stack, lookup.stack)
    interleave = not args.no_interleave
    require_interleave(declared, interleave)
    flags = flags_from(args)
    decision = decide(flags, declared.settings)
    policy, repeats = decision.policy, decision.runs
    policy, _loosened = under_baseline(flags, policy, baseline, interleave)
    base_env = None
    if interleave:
        base_env = (args.good_env or current_env(baseline.stack)).absolute()
        same = recheck_env(base_env, baseline.build)
        if not same.ok:
            raise BadInput(
                f"{base_env} is not the environment of {baseline.label} (env tree "
                f"{same.tree.sha256[:12]}, recorded {str(baseline.build.env_tree_sha256)[:12]}); "
                "give --good-env, or rebuild it: validators reproduce"
            )
    units = change_units(sides.base_lock, sides.cand_lock, sides.base.raw, sides.cand.raw)
    if not units:
        raise BadInput(f"{args.bad}: its lock and manifest do not differ from {baseline.label}'s")
    settings = Settings(
        work=_work(args, baseline, sides, policy),
        venv_root=venv_root(args.venv_root).absolute(),
        python=find_python(sides.base.manifest.python, args.python),
        policy=policy,
        repeats=repeats,
        interleave=interleave,
        baseline_env=base_env,
        metrics=tuple(args.metric),
        max_gates=args.max_gates,
        max_builds=args.max_builds,
        keep_runs=args.keep_runs,
    )
    return Bisect(sides, baseline, settings), units, refusal


def run(args: argparse.Namespace) -> int:
    with RecordStore.open(args.store, read_only=True) as store:
        bisect, units, refusal = prepare(args, Lookup(store))
    console = console_err()
    console.print(f"bisect state: {bisect.settings.work}", highlight=False)
    bisect.merge_forced(units)
    status, culprits = bisect.run(args.search, refusal)
    data = payload(bisect, status, culprits, args.search)
    render_text(console, data, bisect)
    if args.html:
        write_html(args.html, data)
        console.print(f"HTML report: {args.html}", highlight=False)
    if args.json:
        emit_json(data)
    return EXIT_OK if status == "culprits" else EXIT_CHECK_FAILED
