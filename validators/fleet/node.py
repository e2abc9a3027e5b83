"""The step every node runs: build offline on local disk, validate N times, mark-good, report.

Each step is the real command (`python -m builder build`, `python -m validators run`,
`python -m validators mark-good`) as a subprocess: a node does what a person would type, and
the builder's internals stay the builder's. The node writes into the job folder:

    nodes/<node>/attempt-<n>.json  first: this start, claimed exclusively (a second start in
                                one fleet run, a requeue, does not validate)
    nodes/<node>/tree.tsv.gz    the env's file listing (the verdict names files that differ)
    nodes/<node>/run-<i>.json   each validation report, whatever the outcome
    nodes/<node>/*.log          stderr of each step
    records/<stack>/<file>.json the node's record, when mark-good accepted it
    nodes/<node>/status.json    last: PASS, or FAIL with the phase and the reasons

The node's store is per job (`<local>/stores/<fleet_id>.sqlite`), so `--export` writes this
run's record and nothing older.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from stackgate import dirfd
from stackgate.build_record import BuildOutput
from stackgate.cli_output import ErrorOutput, MarkGoodOutput, MarkGoodRefusal
from stackgate.credentials import redact
from stackgate.envtree import LISTING_RELPATH
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK
from stackgate.proc import Completed, run
from stackgate.settings import value
from validators.core.results import Report
from validators.fleet.spec import FleetSpec
from validators.fleet.status import (
    RECORDS_DIR,
    TREE_LISTING,
    FailedCheck,
    NodeStatus,
    Phase,
    claim_attempt,
    node_dir,
    open_node_dir,
    write_status,
)

# One step may not hang a node forever; a scheduler's own time limit is the real bound.
STEP_TIMEOUT_S = 6 * 3600


def node_name() -> str:
    """The node's name as the scheduler knows it (the fingerprint uses the same variable)."""
    return (
        value("STACKGATE_HOSTNAME")
        or os.environ.get("SLURMD_NODENAME")
        or socket.gethostname().split(".")[0]
    )


def scheduler_job() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("JOB_NAME")


M = TypeVar("M", bound=BaseModel)


def record_note(spec: FleetSpec, node: str) -> str:
    """mark-good's --note: the verdict checks a node's record carries its own."""
    return f"fleet {spec.fleet_id} node {node}"


def _parsed(model: type[M], text: str) -> M | None:
    """`text` as the command's --json model, None when it is not that output."""
    try:
        return model.model_validate_json(text)
    except ValidationError:
        return None


def _error_lines(done: Completed) -> list[str]:
    """The command's own words: its JSON error and details, else the tail of stderr."""
    error = _parsed(ErrorOutput, done.stdout)
    if error is not None and error.error:
        return [error.error, *error.details[:8]]
    lines = [line.rstrip() for line in done.stderr.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith("error:")]
    if starts:  # the CLI contract: `error: <message>` then indented details
        return [line.strip() for line in lines[starts[-1] : starts[-1] + 6]]
    return [line.strip() for line in lines[-5:]] or [f"exit code {done.returncode}, no output"]


@dataclass
class NodeRun:
    spec: FleetSpec
    node: str
    index: int | None
    attempt: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    failed: list[FailedCheck] = field(default_factory=list)

    @property
    def out(self) -> Path:
        return node_dir(self.spec.folder, self.node)

    def _cmd(self, step: str, argv: list[str]) -> Completed:
        started = time.monotonic()
        done = run(
            [self.spec.python, "-m", *argv],
            cwd=Path(self.spec.checkout),
            check=False,
            timeout=STEP_TIMEOUT_S,
        )
        self.seconds[step] = round(self.seconds.get(step, 0.0) + time.monotonic() - started, 2)
        text = redact(f"$ {' '.join(done.argv)}\n(exit {done.returncode})\n{done.stderr}\n")
        with dirfd.opened(open_node_dir(self.spec.folder, self.node)) as folder:
            dirfd.append_at(folder, f"{step}.log", text.encode(), where=self.out / f"{step}.log")
        return done

    def _write(self, name: str, data: bytes) -> Path:
        """Write `name` in this node's folder of the shared job folder: the folder reached
        and the file replaced without following a symlink (others can write there)."""
        with dirfd.opened(open_node_dir(self.spec.folder, self.node)) as folder:
            dirfd.write_at(folder, name, data)
        return self.out / name

    def status(self, outcome: str, phase: Phase, code: int, **fields: Any) -> NodeStatus:
        return NodeStatus(
            fleet_id=self.spec.fleet_id,
            node=self.node,
            index=self.index,
            outcome="PASS" if outcome == "PASS" else "FAIL",
            phase=phase,
            exit_code=code,
            seconds=dict(self.seconds),
            scheduler_job=scheduler_job(),
            attempt=self.attempt,
            **fields,
        )

    def build(self) -> tuple[str | None, NodeStatus | None]:
        spec = self.spec
        argv = ["builder", "build", spec.stack, "--wheelhouse", spec.wheelhouse, "--json"]
        argv += ["--venv-root", str(spec.local_dir(self.node) / "envs")]
        if spec.build_python:
            argv += ["--python", spec.build_python]
        done = self._cmd("build", argv)
        built = _parsed(BuildOutput, done.stdout)
        if done.returncode != 0 or built is None or not built.env:
            reasons = [f"build failed (exit {done.returncode})", *_error_lines(done)]
            return None, self.status("FAIL", "build", done.returncode, reasons=reasons)
        env = built.env
        listing = Path(env) / LISTING_RELPATH
        if listing.is_file() and not listing.is_symlink():
            self._write(TREE_LISTING, listing.read_bytes())
        return env, None

    def validate(self, env: str) -> tuple[list[Path], NodeStatus | None]:
        spec = self.spec
        reports: list[Path] = []
        not_passed: Counter[tuple[str, str]] = Counter()
        reasons: dict[tuple[str, str], str] = {}
        for i in range(1, spec.runs + 1):
            argv = ["validators", "run", spec.stack, "--env", env, "--keep-going", "--json"]
            if spec.only:
                argv += ["--only", *spec.only]
            for option in spec.options:
                argv += ["--option", option]
            done = self._cmd("validate", argv)
            report = _parsed(Report, done.stdout)
            if report is None:
                reasons_ = [f"validation run {i} gave no report (exit {done.returncode})"]
                return reports, self.status(
                    "FAIL",
                    "validate",
                    done.returncode,
                    reasons=reasons_ + _error_lines(done),
                    env=env,
                    runs=len(reports),
                )
            path = self._write(f"run-{i}.json", done.stdout.encode("utf-8"))
            reports.append(path)
            for result in report.results:
                if result.status in ("FAIL", "ERROR"):
                    key = (result.check, result.status)
                    not_passed[key] += 1
                    reasons.setdefault(key, result.reason)
        self.failed = [
            FailedCheck(check=c, status=s, reason=reasons[(c, s)], runs=n)
            for (c, s), n in sorted(not_passed.items())
        ]
        return reports, None

    def mark_good(self, env: str, reports: list[Path]) -> NodeStatus:
        spec = self.spec
        store = spec.local_dir(self.node) / "stores" / f"{spec.fleet_id}.sqlite"
        argv = ["validators", "mark-good", spec.stack, "--env", env, "--json"]
        for report in reports:
            argv += ["--run", str(report)]
        argv += ["--store", str(store), "--export", str(spec.folder / RECORDS_DIR)]
        argv += ["--note", record_note(spec, self.node)]
        if spec.allow_host_mismatch:
            argv.append("--allow-host-mismatch")
        done = self._cmd("mark-good", argv)
        common: dict[str, Any] = {"env": env, "runs": len(reports)}
        made = _parsed(MarkGoodOutput, done.stdout) if done.returncode == EXIT_OK else None
        if made is not None:
            exported = [Path(p) for p in made.exported]
            mine = [p for p in exported if made.record_id[:12] in p.name]
            record_file = str(mine[0].relative_to(spec.folder)) if mine else None
            return self.status(
                "PASS",
                "done",
                EXIT_OK,
                record_id=made.record_id,
                record_file=record_file,
                failed_checks=self.failed,
                **common,
            )
        refusal = _parsed(MarkGoodRefusal, done.stdout)
        refused = (refusal.refused if refusal is not None else []) or _error_lines(done)
        return self.status(
            "FAIL",
            "mark-good",
            done.returncode,
            reasons=refused,
            failed_checks=self.failed,
            **common,
        )


def _restarts() -> int:
    text = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(text) if text.isdigit() else 0


def run_node(spec: FleetSpec, index: int | None, node: str | None = None) -> NodeStatus:
    """The node step; leaves a status.json (an unexpected error is a FAIL with its text),
    except on a second start in one fleet run: that one validates nothing and writes no
    status (the first may still be running); its attempt claim tells the verdict."""
    me = NodeRun(spec, node or node_name(), index)
    claim = claim_attempt(spec.folder, me.node, scheduler_job(), _restarts())
    me.attempt = claim.attempt
    if claim.attempt > 0:
        why = (
            f"attempt {claim.attempt} of node {me.node} in fleet run {spec.fleet_id} "
            f"(scheduler job {claim.scheduler_job}, restarts {claim.restart_count}): a node is "
            "validated once per fleet run; nothing was run"
        )
        return me.status("FAIL", "build", EXIT_CHECK_FAILED, reasons=[why])
    phase: Phase = "build"
    try:
        env, failed = me.build()
        if failed is None and env is not None:
            phase = "validate"
            reports, failed = me.validate(env)
            if failed is None:
                phase = "mark-good"
                failed = me.mark_good(env, reports)
        status = failed
        assert status is not None
    except Exception as exc:  # the status file must say why, whatever broke
        status = me.status("FAIL", phase, 3, reasons=[f"{type(exc).__name__}: {exc}"])
    write_status(spec.folder, status)
    return status


def exit_code_for(status: NodeStatus) -> int:
    return EXIT_OK if status.outcome == "PASS" else EXIT_CHECK_FAILED
