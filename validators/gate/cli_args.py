"""The gate's arguments, shared by the commands that judge (gate, report, reproduce, bisect),
and a parsed `gate` command line as a GateRequest."""

from __future__ import annotations

import argparse
from pathlib import Path

from stackgate.cli_numbers import float_in, int_in
from stackgate.errors import BadInput
from stackgate.path_kind import holds_anything, kind_of
from validators.gate.flow import GateRequest
from validators.gate.policy import (
    DEFAULT_CONFIDENCE,
    DEFAULT_REPEATS,
    DEFAULT_TAIL_TOLERANCE,
    DEFAULT_TOLERANCE,
    GatePolicy,
)
from validators.gate.stack_policy import GateFlags, decide
from validators.records.reference import parse_optional, parse_reference


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tolerance",
        type=float_in(0, 1, high_open=True),
        default=None,
        help=f"regression margin for the main-class gated metrics (default: the baseline "
        f"stack's [validation.gate] tolerance, else {DEFAULT_TOLERANCE}; see "
        "benchmarks/gate/results/gate_family_sim.md)",
    )
    parser.add_argument(
        "--tail-tolerance",
        type=float_in(0, 1, high_open=True),
        default=None,
        help=f"margin for the tail-class gated metrics (default: the stack's tail_tolerance, else "
        f"{DEFAULT_TAIL_TOLERANCE})",
    )
    parser.add_argument(
        "--confidence",
        type=float_in(0.5, 1, low_open=True, high_open=True),
        default=None,
        help=f"family-wise confidence: an equal candidate is refused with probability <= 1 - "
        f"this over all gated metrics together (default {DEFAULT_CONFIDENCE})",
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


def _absolute(path: Path | None) -> Path | None:
    return None if path is None else path.absolute()


def request_from(args: argparse.Namespace) -> GateRequest:
    """`gate`'s (or `report`'s) arguments, parsed once. Paths are made absolute now, while the
    cwd exists: an interleaved gate runs for many minutes, and its cwd can be removed or
    replaced meanwhile (a checkout re-sent under it)."""
    keep = _absolute(getattr(args, "keep_runs", None))
    check_keep_dir(keep)
    candidate = parse_reference(args.candidate)
    if candidate.text.endswith(".toml") and candidate.path.is_file():
        candidate = parse_reference(str(candidate.path.absolute()))
    return GateRequest(
        candidate=candidate,
        baseline=parse_optional(args.baseline),
        runs=tuple(args.runs),
        env=_absolute(args.env),
        interleave_with=_absolute(getattr(args, "interleave_with", None)),
        keep_runs=keep,
        flags=flags_from(args),
    )


def check_keep_dir(path: Path | None) -> None:
    """--keep-runs must not mix this gate's runs with an earlier one's (exit 2 before any run)."""
    if path is None:
        return
    kind = kind_of(path)
    if kind not in (None, "folder"):
        raise BadInput(f"--keep-runs {path}: exists and is not a folder")
    if kind == "folder" and holds_anything(path):
        raise BadInput(f"--keep-runs {path}: not empty (give a new or empty folder)")
