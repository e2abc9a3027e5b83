"""Turn validation reports (one per repeated run) into a record, and say when they may not be.

`qualify` lists every reason the runs do not prove the stack good; mark-good refuses on any.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from stackgate import __version__
from stackgate.errors import BadInput
from stackgate.files import inside, read_json_file
from stackgate.manifest import Manifest
from stackgate.manifest.loading import LoadedStack
from validators.core.results import Report, Result
from validators.records.extract import merge_runs, refuse_invalid, run_metrics, sample_runs
from validators.records.gated import facts_for
from validators.records.model import (
    MAX_SAMPLES,
    BuildFacts,
    HostFingerprint,
    Record,
    refuse_secrets,
)


def qualify(loaded: LoadedStack, reports: Sequence[Report]) -> list[str]:
    """Why these runs do not show every required validator passing ([] when they do)."""
    manifest = loaded.manifest
    required = list(manifest.validation.required)
    problems: list[str] = []
    file_sha = loaded.file_sha256()
    env_paths = {r.env_path for r in reports if r.env_path}
    if len(env_paths) > 1:
        problems.append(f"the runs judged different environments: {', '.join(sorted(env_paths))}")
    for i, report in enumerate(reports, start=1):
        run = f"run {i}" if len(reports) > 1 else "the run"
        if report.stack != manifest.name:
            problems.append(f"{run} validated stack '{report.stack}', not '{manifest.name}'")
        if report.manifest_sha256 and report.manifest_sha256 != file_sha:
            problems.append(
                f"{run} used another version of {loaded.path.name} "
                f"(sha256 {report.manifest_sha256[:12]}, now {file_sha[:12]})"
            )
        for group in required:
            results = [r for r in report.results if r.group == group]
            if group in report.groups_skipped:
                problems.append(
                    f"{run}: required group '{group}' was skipped: {report.groups_skipped[group]}"
                )
            elif not results:
                problems.append(f"{run}: required group '{group}' did not run")
            for r in results:
                if r.status != "PASS" and not _acceptable_skip(r, manifest):
                    problems.append(f"{run}: {r.check} {r.status}: {r.reason}")
    return problems


# Checks of the GPUs' links: a host of one GPU has nothing for them to judge (SKIP).
_LINK_CHECKS = frozenset({"host.interconnect", "host.p2p"})


def _acceptable_skip(r: Result, manifest: Manifest) -> bool:
    """A SKIP that does not stop a record: a finding the stack's own manifest accepts (the SKIP
    keeps the finding and the reason in the record), or a GPU-link check on a one-GPU host
    when no serving profile of the stack spans GPUs (TP 1 needs no interconnect). Without it,
    every SGLang run on a one-GPU host is refused for these alone."""
    if r.status != "SKIP":
        return False
    accepted = manifest.validation.accepted_findings.get(r.check)
    if accepted is not None and r.evidence.get("accepted") == accepted:
        return True
    one_gpu = bool(manifest.serving) and all(p.tp == 1 for p in manifest.serving.values())
    return r.check in _LINK_CHECKS and one_gpu and "fewer than 2 GPUs" in r.reason


_MAX_GOLDEN_BYTES = 8 << 20


def golden_references(loaded: LoadedStack) -> dict[str, Any]:
    """The greedy outputs the correctness checks compare against, per serving profile.

    validators/serve keeps them in the file the profile's `correctness_reference` names (JSON,
    relative to the manifest); a record carries a copy so a new host can check its outputs
    against what the known-good stack said, even without that file. Only a regular file inside
    the manifest's folder is copied: records go to git, and a reference naming any other file
    of the host (a credentials file, say) must not carry it there (exit 2).
    """
    out: dict[str, Any] = {}
    for name, profile in loaded.manifest.serving.items():
        if not profile.correctness_reference:
            continue
        field = f"{loaded.path}: serving.{name}.correctness_reference"
        path = loaded.folder / profile.correctness_reference
        try:
            inside(loaded.folder, path)
        except BadInput as exc:
            raise BadInput(
                f"{field}: {exc.message}; it must name a file in the stack's folder"
            ) from None
        if not path.exists():
            continue  # absent: the correctness check itself says so
        out[f"serving.{name}"] = read_json_file(path, _MAX_GOLDEN_BYTES)
    return out


def _merge_checks(reports: Sequence[Report]) -> list[Result]:
    """One result per check: the worst status over the runs (a flaky check is not a PASS)."""
    order = {"ERROR": 0, "FAIL": 1, "SKIP": 2, "PASS": 3}
    merged: dict[str, Result] = {}
    for report in reports:
        for r in report.results:
            have = merged.get(r.check)
            if have is None or order[r.status] < order[have.status]:
                # The numbers go to the record's metrics; its checks keep the format they
                # always had (a record's id hashes them).
                merged[r.check] = r.model_copy(update={"measurements": []})
    return list(merged.values())


def compose_record(
    loaded: LoadedStack,
    reports: Sequence[Report],
    *,
    build: BuildFacts,
    host: HostFingerprint,
    kind: Literal["known-good", "candidate"],
    note: str | None = None,
    host_mismatch: Sequence[str] = (),
) -> Record:
    runs = [run_metrics(r) for r in reports]
    refuse_invalid(runs, where=(f"run {i} ({r.started_at})" for i, r in enumerate(reports, 1)))
    metrics, distributions, golden = merge_runs(runs)
    endless = [f"{k}: {len(v)} samples" for k, v in metrics.items() if len(v) > MAX_SAMPLES]
    if endless:
        raise BadInput(
            f"more than {MAX_SAMPLES} samples of a metric (one per validation run); the runs "
            "list repeats no gate can resample",
            details=endless[:20],
        )
    golden = {**golden_references(loaded), **golden}
    env = build.env_profile or loaded.manifest.env_for(None)
    try:
        who: str | None = f"{getpass.getuser()}@{socket.gethostname()}"
    except (KeyError, OSError):
        who = None
    record = Record(
        kind=kind,
        stack=loaded.manifest.name,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        created_by=who,
        stackgate_version=__version__,
        note=note,
        manifest_sha256=loaded.file_sha256(),
        manifest=loaded.raw,
        build=build,
        host=host,
        host_mismatch=list(host_mismatch),
        env=env,
        runs=max(1, len(reports)),
        checks=_merge_checks(reports),
        metrics=metrics,
        sample_runs=sample_runs(runs),
        metric_facts={key: facts_for(key) for key in metrics},
        distributions=distributions,
        golden_outputs=golden,
    )
    refuse_secrets(record, where=f"the {kind} record of {record.stack}")
    return record.sealed()
