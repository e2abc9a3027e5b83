"""Validation runs in child processes: one `validators run --json`, N of one env, or N pairs of
two envs interleaved; and the one reader of what such a run prints (a Report, else the child's
stderr tail). Used by gate, mark-good, reproduce and `run --image`."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from stackgate import proc
from stackgate.credentials import redact
from stackgate.errors import EnvironmentProblem
from stackgate.output import console_err
from validators.core.results import Report


def validate_once(
    stack: str,
    env: Path,
    extra: Sequence[str] = (),
    *,
    what: str = "",
    keep: Path | None = None,
    env_vars: Mapping[str, str] | None = None,
) -> Report:
    """`python -m validators run STACK --env ENV --keep-going --json`; the report, PASS or not.

    ENV is made absolute here: the child inherits this process's cwd, which may be gone or
    replaced by the time a later run of an interleaved gate starts (stackgate.paths.working_dir).
    keep: a file stem; the child's stdout goes to KEEP.json and its stderr to KEEP.err, written
    before the report is parsed, so a run that gave no report still leaves its trace.
    env_vars: the child's whole environment (default: this process's).
    """
    argv = [sys.executable, "-m", "validators", "run", stack, "--env", str(env.absolute()),
            "--keep-going", "--json", *extra]  # fmt: skip
    done = proc.run(argv, env=env_vars, check=False)
    if keep is not None:
        keep_output(keep, done.stdout, done.stderr, done.returncode)
    return parse_run_output(done.stdout, done.stderr, done.returncode, what=what)


def keep_output(stem: Path, stdout: str, stderr: str, returncode: int) -> None:
    """STEM.json (stdout) and STEM.err (stderr, then the exit status) of one child run."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_name(stem.name + ".json").write_text(redact(stdout))
    stem.with_name(stem.name + ".err").write_text(redact(f"{stderr}\n[exit {returncode}]\n"))


def run_validations(
    stack: str,
    env: Path,
    repeats: int,
    extra: Sequence[str] = (),
    *,
    keep_dir: Path | None = None,
) -> list[Report]:
    """`repeats` validation runs of one env, one after the other (kept as run-NN.* in keep_dir)."""
    console = console_err()
    reports = []
    for i in range(1, repeats + 1):
        console.print(f"validation run {i}/{repeats} of {stack} on {env}")
        keep = keep_dir / f"run-{i:02d}" if keep_dir is not None else None
        reports.append(validate_once(stack, env, extra, what=f"run {i}/{repeats}", keep=keep))
    return reports


def run_interleaved(
    baseline: tuple[str, Path],
    candidate: tuple[str, Path],
    repeats: int,
    *,
    keep_dir: Path | None = None,
) -> tuple[list[Report], list[Report]]:
    """Runs of both envs in ABBA order, so slow drift of the host (thermals, neighbours, a
    cache warming up) lands on both sides equally instead of looking like a regression.
    keep_dir: each child's output kept as pair-NN-baseline.* / pair-NN-candidate.*.
    (benchmarks/gate/results/gate_synthetic_server.md)"""
    console = console_err()
    base_reports: list[Report] = []
    cand_reports: list[Report] = []
    for i in range(repeats):
        order = (("baseline", baseline), ("candidate", candidate))
        for side, (stack, env) in order if i % 2 == 0 else order[::-1]:
            console.print(f"pair {i + 1}/{repeats}: {side} {stack} on {env}")
            what = f"pair {i + 1}/{repeats}, {side} run"
            keep = keep_dir / f"pair-{i + 1:02d}-{side}" if keep_dir is not None else None
            report = validate_once(stack, env, what=what, keep=keep)
            (base_reports if side == "baseline" else cand_reports).append(report)
    return base_reports, cand_reports


STDERR_TAIL_LINES = 15


def parse_run_output(stdout: str, stderr: str, returncode: int, *, what: str = "") -> Report:
    """The report a `validators run --json` printed; otherwise EnvironmentProblem whose details
    keep the child's stderr tail (its stdout when stderr is empty): the only trace of why it
    died once the gate has moved on."""
    try:
        return Report.model_validate(json.loads(stdout))
    except (json.JSONDecodeError, ValidationError):
        source, text = ("stderr", stderr) if stderr.strip() else ("stdout", stdout)
        lines = text.strip().splitlines()
        tail = lines[-STDERR_TAIL_LINES:]
        head = f"its {source}" + (
            f", last {len(tail)} of {len(lines)} lines" if lines else ": empty"
        )
        where = f" ({what})" if what else ""
        raise EnvironmentProblem(
            f"`python -m validators run`{where} gave no report (exit {returncode})",
            details=[f"{head}:" if lines else head, *tail],
        ) from None
