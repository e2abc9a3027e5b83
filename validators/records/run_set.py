"""Which run reports may be merged into one record, with which env's build facts.

A record says "these N runs of stack S on env E (tree T) on host H gave these numbers"; each part
is checked against the reports, for mark-good and for the gate's candidate alike:
- N: the same report given twice is one run (eight copies would pass the eight-run minimum with
  zero noise);
- E/T: the record's build facts must be the env the runs judged: a report keeps its env's build
  tree hash (`env_tree_sha256`), so a `current` link moved meanwhile, or `--env` naming another
  env, is caught; reports without it are compared by resolved path;
- S: an env built for another stack is not this stack's env;
- H: runs on different hosts are not repeats of one measurement;
- and runs under different versions of the manifest are not one candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from validators.core.results import Report
from validators.records.fingerprint import diff_hosts, fingerprint_for_run, probe_host
from validators.records.model import BuildFacts, HostFingerprint, content_sha256


def _label(i: int, reports: Sequence[Report]) -> str:
    return f"run {i}" if len(reports) > 1 else "the run"


def duplicate_runs(reports: Sequence[Report]) -> list[str]:
    seen: dict[str, int] = {}
    out: list[str] = []
    for i, report in enumerate(reports, start=1):
        key = content_sha256(report.model_dump(mode="json"))
        if key in seen:
            out.append(
                f"run {i} is run {seen[key]} again (the same report twice); repeated runs "
                "must be separate validation runs"
            )
        else:
            seen[key] = i
    return out


def mixed_manifests(reports: Sequence[Report]) -> list[str]:
    """Runs made under different versions of the manifest are two candidates, not one."""
    first: dict[str, int] = {}
    for i, report in enumerate(reports, start=1):
        if report.manifest_sha256 is not None:
            first.setdefault(report.manifest_sha256, i)
    if len(first) < 2:
        return []
    return [
        "the runs were made under different versions of the manifest: "
        + ", ".join(f"from run {i} sha256 {sha[:12]}" for sha, i in first.items())
    ]


def env_mismatches(
    stack: str, reports: Sequence[Report], env: Path | None, build: BuildFacts
) -> list[str]:
    """Why the env's build facts are not those of the env the runs judged ([] when they are)."""
    out: list[str] = []
    built_for = build.raw.get("stack")
    if isinstance(built_for, str) and built_for != stack:
        out.append(f"{env}: built for stack '{built_for}', not '{stack}'")
    tree = build.env_tree_sha256
    for i, report in enumerate(reports, start=1):
        run = _label(i, reports)
        if report.env_tree_sha256 is not None:
            if tree is not None and report.env_tree_sha256 != tree:
                out.append(
                    f"{run} judged the env build with tree {report.env_tree_sha256[:16]}, "
                    f"{env} holds tree {tree[:16]} (another build, or its `current` link "
                    "moved since the run)"
                )
        elif report.env_path and env is not None:
            judged = Path(report.env_path).resolve()
            if judged != env.resolve():
                out.append(f"{run} judged {judged}, not {env.resolve()}")
    return out


def run_set_problems(
    stack: str, reports: Sequence[Report], env: Path | None, build: BuildFacts
) -> list[str]:
    """Every reason these reports cannot make one record with these build facts."""
    problems = duplicate_runs(reports) + mixed_manifests(reports)
    problems += env_mismatches(stack, reports, env, build)
    if sum(1 for r in reports if not r.host.empty) > 1:
        problems += mixed_hosts(reports, probe_host())
    return problems


def mixed_hosts(reports: Sequence[Report], local: HostFingerprint) -> list[str]:
    """Runs from different machines (or GPUs, drivers) are not repeats of one measurement."""
    hosts = [
        (i, fingerprint_for_run(r.host, local))
        for i, r in enumerate(reports, 1)
        if not r.host.empty
    ]
    out: list[str] = []
    for i, host in hosts[1:]:
        first_i, first = hosts[0]
        fields = [
            f"{d.field} {d.recorded} vs {d.here}"
            for d in diff_hosts(first, host)
            if d.impact != "info" or (d.field == "hostname" and "unknown" not in d.why)
        ]
        if fields:
            out.append(f"run {i} was made on another host than run {first_i}: {'; '.join(fields)}")
    return out
