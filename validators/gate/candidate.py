"""Make the candidate side of a gate: from run reports, or by running the validators N times."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from stackgate import proc
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.loading import load_stack
from stackgate.output import console_err
from validators.records.build_facts import build_record_path, read_build_facts
from validators.records.compose import compose_record
from validators.records.fingerprint import fingerprint_for_run, probe_host
from validators.records.model import BuildFacts, HostFingerprint, Record
from validators.results import Report


def host_of(reports: Sequence[Report]) -> HostFingerprint:
    """The host the runs were made on (see fingerprint_for_run)."""
    local = probe_host()
    for report in reports:
        if report.host:
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
) -> Record:
    if not reports:
        raise BadInput("no run reports for the candidate")
    name = stack or reports[0].stack
    loaded = load_stack(name)
    env_path = env_of(reports, env)
    build = BuildFacts()
    if env_path is not None and build_record_path(env_path).is_file():
        build = read_build_facts(env_path, image_digest=image_digest)
    return compose_record(loaded, reports, build=build, host=host_of(reports), kind="candidate")


def run_validations(stack: str, env: Path, repeats: int, extra: Sequence[str] = ()) -> list[Report]:
    """`python -m validators run STACK --env ENV --json`, `repeats` times, reports kept."""
    reports: list[Report] = []
    console = console_err()
    for i in range(1, repeats + 1):
        console.print(f"validation run {i}/{repeats} of {stack} on {env}")
        done = proc.run(
            [
                sys.executable,
                "-m",
                "validators",
                "run",
                stack,
                "--env",
                str(env),
                "--keep-going",
                "--json",
                *extra,
            ],
            check=False,
        )
        reports.append(parse_run_output(done.stdout, done.stderr, done.returncode))
    return reports


def parse_run_output(stdout: str, stderr: str, returncode: int) -> Report:
    try:
        data = json.loads(stdout)
        if isinstance(data, dict) and isinstance(data.get("report"), dict):
            data = data["report"]
        return Report.model_validate(data)
    except (json.JSONDecodeError, ValidationError):
        tail = (stderr or stdout).strip().splitlines()[-10:]
        raise EnvironmentProblem(
            f"`python -m validators run` gave no report (exit {returncode})", details=tail
        ) from None
