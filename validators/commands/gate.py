"""`gate CANDIDATE [--baseline STACK|RECORD]`: refuse a candidate that fails a check or regresses.

CANDIDATE is a record (file or id), a run report file, or a stack name. For a stack, give the
repeated runs with --run, or let the gate run the validators --repeats times on --env (default:
the builder's `current` env of the stack).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.build_record import build_record_path
from stackgate.cli import emit_json
from stackgate.cli_numbers import RUNS, float_in, int_in
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput, CheckFailed, ManifestError
from stackgate.layout import current_env
from stackgate.loading import load_stack
from stackgate.manifest import GateSettings
from stackgate.output import console_err
from stackgate.paths import stack_names
from validators.env_verify import recheck_env, require_env_matches
from validators.gate.candidate import candidate_record
from validators.gate.compare import gate
from validators.gate.policy import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPEATS,
    DEFAULT_TAIL_TOLERANCE,
    DEFAULT_TOLERANCE,
    GatePolicy,
)
from validators.gate.render import render_gate
from validators.gate.stack_policy import (
    GateFlags,
    StackGate,
    decide,
    require_interleave,
    stack_gate,
    under_baseline,
)
from validators.records.build_facts import read_build_facts
from validators.records.cli_args import add_run_argument, add_store_argument
from validators.records.model import Record
from validators.records.resolve import is_record_file, read_report, resolve_record
from validators.records.store import RecordStore
from validators.report_html import write_report
from validators.runs import run_interleaved, run_validations

NAME = "gate"
HELP = "compare a candidate with a known-good record (checks, noise-aware metrics, versions)"


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tolerance",
        type=float_in(0, 1, high_open=True),
        default=None,
        help=f"regression margin for means/medians/throughput (default: the baseline stack's "
        f"[validation.gate] tolerance, else {DEFAULT_TOLERANCE}; see "
        "benchmarks/results/gate_power.md)",
    )
    parser.add_argument(
        "--tail-tolerance",
        type=float_in(0, 1, high_open=True),
        default=None,
        help=f"margin for p90/p95/p99/max metrics (default: the stack's tail_tolerance, else "
        f"{DEFAULT_TAIL_TOLERANCE})",
    )
    parser.add_argument(
        "--confidence",
        type=float_in(0.5, 1, low_open=True, high_open=True),
        default=None,
        help=f"one-sided bootstrap confidence (default {DEFAULT_CONFIDENCE})",
    )
    parser.add_argument(
        "--min-repeats",
        type=int_in(2, 1000),
        default=None,
        help=f"runs needed on each side (default: the stack's repeats, else {DEFAULT_REPEATS})",
    )


def flags_from(args: argparse.Namespace) -> GateFlags:
    """The policy flags of `gate`, `report`, `reproduce` or `bisect` (each has some of them)."""
    return GateFlags(
        tolerance=getattr(args, "tolerance", None),
        tail_tolerance=getattr(args, "tail_tolerance", None),
        confidence=getattr(args, "confidence", None),
        min_repeats=getattr(args, "min_repeats", None),
        repeats=getattr(args, "repeats", None),
    )


def policy_from(args: argparse.Namespace) -> GatePolicy:
    """The flags over the defaults (report, reproduce); `gate` adds the stack's own settings."""
    return decide(flags_from(args)).policy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("candidate", help="record file/id, run report file, or stack name")
    parser.add_argument(
        "--baseline",
        default=None,
        help="STACK (its newest known-good record) or RECORD (file or id); "
        "default: the candidate's stack",
    )
    add_run_argument(parser, required=False)
    parser.add_argument(
        "--env",
        type=Path,
        default=None,
        help="environment to validate when CANDIDATE is a stack without --run",
    )
    parser.add_argument(
        "--repeats",
        type=RUNS,
        default=None,
        help=f"validation runs (ABBA pairs with --interleave-with) to make when the gate runs "
        f"them (default: the baseline stack's [validation.gate] repeats, else {DEFAULT_REPEATS})",
    )
    parser.add_argument(
        "--interleave-with",
        type=Path,
        default=None,
        metavar="BASELINE_ENV",
        help="re-measure the baseline's env (the record's, checked by tree hash) in ABBA order "
        "with the candidate's runs, so host drift cancels; needs CANDIDATE as a stack name or "
        "manifest (.toml) + --env",
    )
    parser.add_argument("--html", type=Path, default=None, help="also write an HTML report")
    parser.add_argument(
        "--keep-runs",
        type=Path,
        default=None,
        metavar="DIR",
        help="when the gate runs the validators: keep each run's report and stderr in DIR "
        "(run-NN.json/.err, or pair-NN-baseline/candidate.json/.err); DIR must be new or empty",
    )
    parser.add_argument("--all", action="store_true", help="list checks that are OK too")
    add_policy_arguments(parser)
    add_store_argument(parser)


def default_env(stack: str) -> Path:
    """The builder's selected env of the stack (stackgate.layout)."""
    return current_env(stack)


def _both_sides(args: argparse.Namespace, store: RecordStore) -> tuple[Record, Record]:
    """Candidate and baseline; when both are missing, one error says so for both."""
    try:
        candidate = resolve_candidate(args, store)
    except BadInput as exc:
        stack = args.baseline or args.candidate
        try:
            resolve_record(stack, store)
        except BadInput as missing:
            raise BadInput(
                f"{exc.message}; and the baseline is missing too: {missing.message}",
                details=[*exc.details, *missing.details],
            ) from None
        raise
    return candidate, resolve_record(args.baseline or candidate.stack, store)


def resolve_candidate(args: argparse.Namespace, store: RecordStore) -> Record:
    ref: str = args.candidate
    path = Path(ref)
    reports = [read_report(p) for p in args.runs]
    if path.is_file() and path.suffix != ".toml":
        if is_record_file(path):
            return resolve_record(ref, store)
        reports.insert(0, read_report(path))
        return candidate_record(None, reports, env=args.env)
    if ref in stack_names() or ref.endswith(".toml"):
        if not reports:
            env = args.env or default_env(ref)
            if not env.exists():
                raise BadInput(
                    f"no runs for candidate {ref}: give --run RESULT.json, or --env PATH to "
                    f"validate (default {env} does not exist)"
                )
            reports = run_validations(ref, env, args.repeats, keep_dir=args.keep_runs)
        return candidate_record(ref, reports, env=args.env)
    return resolve_record(ref, store)


def interleaved(args: argparse.Namespace, store: RecordStore) -> tuple[Record, Record, Record]:
    """(baseline record, re-measured baseline, candidate) from ABBA runs of the two envs."""
    stack: str = args.candidate
    if not (stack in stack_names() or stack.endswith(".toml")) or args.runs:
        raise BadInput(
            "--interleave-with needs CANDIDATE as a stack name or manifest (.toml) and no --run "
            "files"
        )
    cand_env: Path = args.env or default_env(stack)
    base_env: Path = args.interleave_with
    baseline = resolve_record(args.baseline or stack, store)
    facts = read_build_facts(base_env)
    require_env_matches(base_env, facts)  # unchanged since its own build
    # The record's env, hashed the way the record was (its scheme): a record made before a
    # newer tree-hash scheme names the same files by another hash than today's build record.
    same = recheck_env(base_env, baseline.build)
    if not same.ok:
        raise BadInput(
            f"{base_env} is not the environment of {baseline.label}: env tree "
            f"{same.tree.sha256[:12]} vs recorded {str(baseline.build.env_tree_sha256)[:12]} "
            f"(tree-hash scheme {same.tree.scheme}) (rebuild it: validators reproduce)"
        )
    if build_record_path(cand_env).is_file():
        require_env_matches(cand_env, read_build_facts(cand_env))
    base_reports, cand_reports = run_interleaved(
        (baseline.stack, base_env), (stack, cand_env), args.repeats, keep_dir=args.keep_runs
    )
    fresh = candidate_record(baseline.stack, base_reports, env=base_env)
    return baseline, fresh, candidate_record(stack, cand_reports, env=cand_env)


def absolute_paths(args: argparse.Namespace) -> None:
    """Fix the path arguments now, while the cwd exists: an interleaved gate runs for many
    minutes, and its cwd can be removed or replaced meanwhile (a checkout re-sent under it)."""
    for name in ("env", "interleave_with", "html", "keep_runs"):
        value = getattr(args, name)
        if value is not None:
            setattr(args, name, value.absolute())
    if args.candidate.endswith(".toml") and Path(args.candidate).is_file():
        args.candidate = str(Path(args.candidate).absolute())


def check_keep_dir(path: Path | None) -> None:
    """--keep-runs must not mix this gate's runs with an earlier one's (exit 2 before any run)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise BadInput(f"--keep-runs {path}: exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        raise BadInput(f"--keep-runs {path}: not empty (give a new or empty folder)")


def baseline_stack(args: argparse.Namespace, store: RecordStore) -> str | None:
    """The stack the candidate is gated against, known before any run; None when it cannot be
    told yet (the real error, if any, comes from resolving both sides)."""
    try:
        if args.baseline:
            if args.baseline in stack_names():
                return str(args.baseline)  # its manifest is read by stack_gate
            return resolve_record(args.baseline, store).stack
        ref: str = args.candidate
        if ref in stack_names() or ref.endswith(".toml"):
            return load_stack(ref).manifest.name
        path = Path(ref)
        if path.is_file():
            return (resolve_record(ref, store) if is_record_file(path) else read_report(path)).stack
        return resolve_record(ref, store).stack
    except ManifestError:
        raise  # a bad manifest is the answer (exit 2 naming file and field), not a fallback
    except BadInput:
        return None


def run(args: argparse.Namespace) -> int:
    absolute_paths(args)
    check_keep_dir(args.keep_runs)
    remeasured: Record | None = None
    with RecordStore.open(args.store, read_only=True) as store:
        declared: StackGate = stack_gate(baseline_stack(args, store))
        require_interleave(declared, args.interleave_with is not None)
        flags = flags_from(args)
        decision = decide(flags, declared.settings)
        policy, args.repeats = decision.policy, decision.runs
        if declared.source is not None and declared.settings != GateSettings():
            console_err().print(f"gate policy: {declared.source} [validation.gate] under the flags")
        if args.interleave_with is not None:
            baseline, remeasured, candidate = interleaved(args, store)
        else:
            candidate, baseline = _both_sides(args, store)
    if baseline.kind != "known-good":
        # A baseline named by file or id can be any record; only a proven one is a baseline.
        raise CheckFailed(
            f"baseline {baseline.label} is a {baseline.kind} record, not known-good; refusing "
            f"to gate against it (mark it good first: stackgate mark-good)"
        )
    policy, loosened = under_baseline(flags, policy, baseline, args.interleave_with is not None)
    if loosened:
        console_err().print(
            "gate policy: the working tree's [validation.gate] is looser than the one the "
            f"baseline was proven under; the baseline's applies: {'; '.join(loosened)}"
        )
    result = gate(baseline, candidate, policy, remeasured=remeasured)
    console = console_err()
    render_gate(console, result, show_ok_checks=args.all)
    if args.html:
        write_report(args.html, candidate, baseline=remeasured or baseline, gate_result=result)
        console.print(f"HTML report: {args.html}")
    if args.json:
        emit_json({"ok": result.passed, **result.model_dump(mode="json")})
    return EXIT_OK if result.passed else EXIT_CHECK_FAILED
