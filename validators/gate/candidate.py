"""The candidate side of a gate as a record, from its run reports (validators/core/runs.py makes them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from stackgate.build_record import build_record_path
from stackgate.errors import BadInput
from stackgate.manifest.loading import LoadedStack, load_stack
from validators.core.results import Report
from validators.records.build_facts import read_build_facts
from validators.records.compose import compose_record
from validators.records.fingerprint import fingerprint_for_run, probe_host
from validators.records.model import BuildFacts, HostFingerprint, Record
from validators.records.run_set import run_set_problems


def host_of(reports: Sequence[Report]) -> HostFingerprint:
    """The host the runs were made on (see fingerprint_for_run)."""
    local = probe_host()
    for report in reports:
        if not report.host.empty:
            return fingerprint_for_run(report.host, local)
    return local


def env_of(reports: Sequence[Report], env: Path | None) -> Path | None:
    if env is not None:
        return env
    for report in reports:
        if report.env_path:
            return Path(report.env_path)
    return None


def candidate_record(
    stack: str | None,
    reports: Sequence[Report],
    *,
    env: Path | None = None,
    image_digest: str | None = None,
    load: Callable[[str], LoadedStack] = load_stack,
) -> Record:
    """The runs as one record of `stack` (default: the stack the first run names); `load` reads
    its manifest (a command passes its Lookup's, so the manifest is read once)."""
    if not reports:
        raise BadInput("no run reports for the candidate")
    name = stack or reports[0].stack
    loaded = load(name)
    env_path = env_of(reports, env)
    build = BuildFacts()
    if env_path is not None and build_record_path(env_path).is_file():
        build = read_build_facts(env_path, image_digest=image_digest)
    problems = [
        f"run {i} validated stack '{r.stack}', not '{loaded.manifest.name}'"
        for i, r in enumerate(reports, start=1)
        if r.stack != loaded.manifest.name
    ]
    problems += run_set_problems(loaded.manifest.name, reports, env_path, build)
    if problems:
        raise BadInput(
            f"the candidate's runs cannot make one record of {loaded.manifest.name}",
            details=problems,
        )
    return compose_record(loaded, reports, build=build, host=host_of(reports), kind="candidate")
