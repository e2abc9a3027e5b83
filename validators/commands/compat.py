"""`python -m validators compat PACKAGE [--versions SPEC] --against torch[==SPEC]`: which
versions of a binary package load beside which torch, from byte ranges of the index's wheels
(no install, no GPU). Prints the matrix, the proposed rules and the hand-written rules'
agreement; `--json` the whole matrix, `--html FILE` a heat map.

`--audit-variants`: the package's wheels that publish variant properties (PEP 825 draft),
each property audited against the binary (validators.torch_abi.variants); exit 1 when one is
false."""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from stackgate.cli import emit_json
from stackgate.cli_numbers import WORKERS, int_in
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.credentials import redact
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.files import atomic_write_text
from stackgate.lock.torch_abi import PYPI, PairVerdict
from stackgate.output import console_err
from stackgate.settings import switch
from validators.elf.facts_cache import FactsCache, default_root
from validators.torch_abi.lock_verdict import check_lock

if TYPE_CHECKING:
    from rich.console import Console

    from validators.torch_abi.flow import Judged
    from validators.torch_abi.matrix import Request

NAME = "compat"
HELP = "which versions of a binary package load beside which torch (from the wheels' bytes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "package", nargs="?", default=None, help="the package to judge, e.g. sgl-kernel"
    )
    parser.add_argument(
        "--lock",
        default=None,
        help="instead: judge every binary package of this uv.lock that links torch beside its "
        "torch (what `builder lock` asks; --json gives the verdict it reads)",
    )
    parser.add_argument(
        "--versions",
        action="append",
        default=[],
        help="its versions, a specifier (repeat for a union; default: all)",
    )
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="torch[SPEC]",
        help="the torch versions, e.g. 'torch>=2.6,<2.15' or 'torch==2.9.*' (repeat for a "
        "union; required unless --audit-variants)",
    )
    parser.add_argument(
        "--audit-variants",
        action="store_true",
        help="audit the variant properties its wheels publish (GPU archs, CUDA bounds, torch "
        "ABI) against their binaries instead of the matrix",
    )
    parser.add_argument("--index", default=PYPI, help="the package's index (PEP 691/503)")
    parser.add_argument("--torch-index", default=None, help="torch's index (default: --index)")
    parser.add_argument("--python", default="3.12", help="target CPython X.Y (default 3.12)")
    parser.add_argument(
        "--glibc", default=None, help="target glibc X.Y (default: this host's, else 2.35)"
    )
    parser.add_argument(
        "--targets", action="append", default=[], help="GPU archs to require, e.g. 12.0a"
    )
    parser.add_argument(
        "--limit", type=int_in(1, 100_000), default=None, help="only the newest N versions"
    )
    parser.add_argument("--pre", action="store_true", help="include pre-releases")
    parser.add_argument("--offline", action="store_true", help="caches only, no network")
    parser.add_argument(
        "--cache", type=FOLDER, help="facts cache (default $STACKGATE_CACHE/lockcheck)"
    )
    parser.add_argument("--jobs", type=WORKERS, default=6, help="members fetched at once")
    parser.add_argument(
        "--processes",
        type=WORKERS,
        default=min(4, os.cpu_count() or 1),
        help="worker processes judging torch versions (default: the cores, at most 4)",
    )
    parser.add_argument("--html", type=OUTPUT_FILE, help="write the heat map report here")
    parser.add_argument("--rules", help="rules file to check (default: stacks/rules.toml)")


def _xy(value: str, what: str) -> tuple[int, int]:
    parts = value.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise BadInput(f"{what} {value!r}: want X.Y")
    return int(parts[0]), int(parts[1])


def _host_glibc() -> tuple[int, int]:
    name, version = platform.libc_ver()
    if name == "glibc" and version.count(".") >= 1:
        major, minor = version.split(".")[:2]
        if major.isdigit() and minor.isdigit():
            return int(major), int(minor)
    return (2, 35)


def request_from(args: argparse.Namespace) -> Request:
    from validators.torch_abi.matrix import Request

    torch: list[SpecifierSet] = []
    for value in args.against:
        try:
            against = Requirement(value)
        except InvalidRequirement as exc:
            raise BadInput(f"--against {value!r}: {exc}") from None
        if canonicalize_name(against.name) != "torch":
            raise BadInput(f"--against {value!r}: only torch is judged against (torch[SPEC])")
        torch.append(against.specifier)
    versions: list[SpecifierSet] = []
    for value in args.versions or [""]:
        try:
            versions.append(SpecifierSet(value))
        except InvalidSpecifier as exc:
            raise BadInput(f"--versions {value!r}: {exc}") from None
    targets = tuple(t for value in args.targets for t in value.split(",") if t)
    return Request(
        package=canonicalize_name(args.package),
        versions=tuple(versions),
        torch=tuple(torch),
        python=_xy(args.python, "--python"),
        glibc=_xy(args.glibc, "--glibc") if args.glibc else _host_glibc(),
        index=args.index.rstrip("/"),
        torch_index=(args.torch_index or args.index).rstrip("/"),
        targets=targets,
        offline=args.offline,
        jobs=args.jobs,
        prereleases=args.pre,
        limit=args.limit,
        processes=args.processes,
    )


def run(args: argparse.Namespace) -> int:
    if args.lock is not None:
        return _lock(args)
    if args.package is None:
        raise BadInput("name the package to judge (or --lock LOCK)")
    if args.audit_variants:
        return _audit_variants(args)
    if not args.against:
        raise BadInput("--against torch[SPEC] is required (or --audit-variants)")
    from stackgate.manifest.rules import load_rules
    from validators.torch_abi import flow

    started = time.monotonic()
    request = request_from(args)
    rules = load_rules(Path(args.rules) if args.rules else None)
    err = console_err()
    verbose = switch("STACKGATE_VERBOSE")

    def progress(p: PairVerdict) -> None:
        if verbose:
            err.print(f"{p.package} {p.version} + torch {p.torch}: {p.verdict}", highlight=False)

    matrix = flow.compute_matrix(request, _cache(args), progress)
    if not matrix.versions:
        raise BadInput(f"{request.package}: no version matches --versions {args.versions!r}")
    if not matrix.torch_versions:
        raise BadInput(f"--against {args.against!r}: no torch version on the index matches")
    judged = flow.judge(matrix, rules)
    if args.html:
        from validators.torch_abi.matrix_report import html_report

        html = html_report(matrix, judged.proposals, judged.checks)
        atomic_write_text(Path(args.html), redact(html))
    if args.json:
        emit_json(
            {
                "schema_version": 1,
                "matrix": matrix.model_dump(mode="json"),
                "counts": judged.counts(),
                "proposed_rules": [p.toml(matrix.package) for p in judged.proposals],
                "rule_checks": [c.__dict__ for c in judged.checks],
                "breaks_no_rule_covers": len(judged.loose),
            }
        )
    _print_matrix(err, judged, time.monotonic() - started)
    return EXIT_OK


def _cache(args: argparse.Namespace) -> FactsCache:
    return FactsCache(Path(args.cache) if args.cache else default_root())


def _say(err: Console, text: str) -> None:
    err.print(text, highlight=False, markup=False, soft_wrap=True)


def _print_matrix(err: Console, judged: Judged, seconds: float) -> None:
    from validators.torch_abi.matrix_report import text_table

    matrix = judged.matrix
    for line in text_table(matrix):
        _say(err, line)
    for p in matrix.pairs:
        if p.verdict != "loads":
            why = p.first if p.verdict == "breaks" else p.reason
            _say(err, f"{p.verdict.upper()} {matrix.package} {p.version} + torch {p.torch}: "
                      f"{p.kind}: {why[:240]}")  # fmt: skip
    for c in judged.checks:
        if not c.comparable:
            state = f"not compared ({c.note})"
        elif c.disagreements:
            state = (f"DISAGREES: forbids {len(c.disagreements)} pairs that load: "
                     + "; ".join(c.disagreements[:3]))  # fmt: skip
        else:
            state = f"agrees ({c.agreements} pairs it forbids break)"
        _say(err, f"rule {c.rule}: {state}")
    if judged.proposals:
        err.print(
            f"{len(judged.proposals)} proposed rules (copy into stacks/rules.toml to accept; "
            f"--json or --html for the text); {len(judged.loose)} breaking pairs no rule covers",
            highlight=False,
        )
    counts = judged.counts()
    err.print(
        f"OK {matrix.package}: {len(matrix.versions)} versions x {len(matrix.torch_versions)} "
        f"torch: {counts['loads']} load, {counts['breaks']} break, "
        f"{counts['undecidable']} undecidable; read {matrix.bytes_fetched / 1e6:.1f} MB of "
        f"{matrix.wheel_bytes / 1e6:.1f} MB of wheels in {seconds:.1f} s",
        highlight=False,
        soft_wrap=True,
    )


def _audit_variants(args: argparse.Namespace) -> int:
    from validators.torch_abi import flow

    started = time.monotonic()
    request = request_from(args)
    report = flow.audit_variants(request, _cache(args), chosen=bool(args.versions))
    false = [c for a in report.audits for c in a.false]
    unreadable = [a for a in report.audits if a.error]
    if args.json:
        emit_json({"schema_version": 1, "variants": report.model_dump(mode="json")})
    err = console_err()
    for a in report.audits:
        head = f"{a.wheel} [{a.label}]"
        if a.error:
            _say(err, f"ERROR {head}: {a.error}")
        for c in a.claims:
            _say(err, f"{c.verdict.upper()} {head}: {c.claim}: {c.evidence}")
    err.print(
        f"{'FAIL' if false or unreadable else 'OK'} {report.package}: {report.files} files, "
        f"{report.wheels} wheels, {report.labelled_wheels} with a variant label, "
        f"{len(report.variants_json)} variants.json; {len(report.audits)} audited: "
        f"{len(false)} false claims, {len(unreadable)} unreadable "
        f"({time.monotonic() - started:.1f} s)",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_CHECK_FAILED if false or unreadable else EXIT_OK


def _lock(args: argparse.Namespace) -> int:
    """The verdict of one uv.lock (validators.torch_abi.lock_verdict), for `builder lock`: data, exit
    0 whatever it says (refusing a lock is the builder's policy)."""
    lock = Path(args.lock)
    if not lock.is_file():
        raise BadInput(f"--lock {lock}: no such file")
    result = check_lock(lock, _cache(args), index=args.index.rstrip("/"), offline=args.offline,
                        jobs=args.jobs)  # fmt: skip
    if args.json:
        emit_json({"schema_version": 1, "lock": result.model_dump(mode="json")})
    err = console_err()
    for p in result.pairs:
        _say(err, f"{p.verdict.upper()} {p.package} {p.version} + torch {p.torch}: "
                  f"{p.kind + ': ' if p.kind else ''}{(p.first or p.reason)[:240]}")  # fmt: skip
    err.print(
        f"OK {lock}: {len(result.pairs)} binary packages linking torch judged beside torch "
        f"{result.torch} ({result.seconds:.1f} s{', cached' if result.from_cache else ''})"
        + (f"; {result.note}" if result.note else ""),
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK
