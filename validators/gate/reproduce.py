"""Rebuild a recorded known-good stack on this host and say whether it is the same.

Steps, each timed: preflight (this host against the record's fingerprint), find the exact
manifest and lock the record was made from (the working tree, else git history, by sha256),
build through the builder's CLI (`python -m builder build`, a subprocess: validators never
import builder internals), compare env tree hashes, run the validators, compare checks and
numbers with the gate's noise-aware comparison.

Verdicts: REPRODUCED (same env tree, every check the record passed passes, every number
within noise); DIFFERS (built and working, but something differs: tree hash, a number, the
host in a way that matters), each reason listed; FAILED (could not build, or a check fails).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from stackgate import proc
from stackgate.build_record import BuildOutput
from stackgate.cli_output import ErrorOutput
from stackgate.errors import (
    EXIT_BAD_INPUT,
    BadInput,
    CommandFailed,
    StackgateError,
)
from stackgate.loading import load_stack
from stackgate.paths import project_root, stacks_dir
from validators.core.results import Report
from validators.core.runs import validate_once
from validators.gate.compare import GateResult, gate
from validators.gate.policy import GatePolicy
from validators.records.build_facts import build_facts
from validators.records.compose import compose_record
from validators.records.env_verify import recheck_env
from validators.records.fingerprint import HostDifference, diff_hosts, probe_host
from validators.records.model import HostFingerprint, Record

Verdict = Literal["REPRODUCED", "DIFFERS", "FAILED"]


@dataclass
class ReproduceOptions:
    venv_root: Path | None = None
    wheelhouse: Path | None = None
    topology: str | None = None
    python: str | None = None
    index_map: Sequence[str] = ()
    validate: bool = True
    runs: int = 1
    policy: GatePolicy = field(default_factory=GatePolicy)


@dataclass
class ReproduceOutcome:
    record: str
    verdict: Verdict = "REPRODUCED"
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host: list[HostDifference] = field(default_factory=list)
    env: str | None = None
    recorded_tree: str | None = None
    built_tree: str | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    gate: GateResult | None = None

    def fail(self, reason: str) -> None:
        self.verdict = "FAILED"
        self.reasons.append(reason)

    def differ(self, reason: str) -> None:
        if self.verdict != "FAILED":
            self.verdict = "DIFFERS"
        self.reasons.append(reason)

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.verdict == "REPRODUCED",
            "verdict": self.verdict,
            "record": self.record,
            "reasons": self.reasons,
            "notes": self.notes,
            "env": self.env,
            "env_tree": {"recorded": self.recorded_tree, "built": self.built_tree},
            "host_differences": [d.__dict__ for d in self.host],
            "timings_s": self.timings_s,
            "gate": self.gate.model_dump(mode="json") if self.gate else None,
        }


@contextmanager
def _timed(outcome: ReproduceOutcome, step: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        outcome.timings_s[step] = round(time.perf_counter() - t0, 3)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _git_versions(relpath: str) -> Iterator[tuple[str, bytes]]:
    """(commit, content) of every committed version of a file, newest first; none without git."""
    root = project_root()
    try:
        log = proc.run(["git", "-C", root, "log", "--format=%H", "--", relpath], timeout=60)
    except StackgateError:
        return
    for commit in log.stdout.split():
        try:
            shown = proc.run(["git", "-C", root, "show", f"{commit}:{relpath}"], timeout=60)
        except StackgateError:
            continue
        yield commit, shown.stdout.encode("utf-8")


def _git_show(commit: str, path: Path) -> bytes | None:
    try:
        rel = path.resolve().relative_to(project_root()).as_posix()
        shown = proc.run(["git", "-C", project_root(), "show", f"{commit}:{rel}"], timeout=60)
    except (ValueError, StackgateError):
        return None
    return shown.stdout.encode("utf-8")


def _find_version(path: Path, wanted: str | None) -> tuple[bytes | None, str]:
    """Bytes of `path` whose sha256 is `wanted`: the working tree's, else from git history."""
    if path.is_file() and (wanted is None or _sha256(path.read_bytes()) == wanted):
        return path.read_bytes(), "working tree"
    if wanted is None:
        return None, "missing"
    try:
        rel = path.resolve().relative_to(project_root()).as_posix()
    except ValueError:
        return None, "not in this checkout"
    for commit, data in _git_versions(rel):
        if _sha256(data) == wanted:
            return data, f"git {commit[:12]}"
    return None, "not found in the working tree or git history"


_HISTORY_HINT = (
    "check out the commit that has it, or fetch full history (`git fetch --unshallow`) so it "
    "can be found there"
)


@dataclass(frozen=True)
class Sources:
    stacks: Path
    locks: Path
    notes: list[str]


def materialize_sources(record: Record, workdir: Path) -> Sources:
    """A stacks folder and a locks folder holding exactly the record's manifest and lock.

    The working tree is used as is when both match; otherwise the matching versions are taken
    from git history into `workdir` (patches are copied from the working tree; the loader
    checks their sha256 against the manifest).
    """
    stacks = stacks_dir()
    manifest_path = stacks / f"{record.stack}.toml"
    lock_dir = stacks / "locks" / record.stack
    manifest, m_from = _find_version(manifest_path, record.manifest_sha256)
    if manifest is None:
        raise StackgateError(
            f"the manifest the record was made from (sha256 {str(record.manifest_sha256)[:12]}) "
            f"is {m_from}",
            details=[_HISTORY_HINT],
        )
    lock, l_from = _find_version(lock_dir / "uv.lock", record.build.lock_sha256)
    if lock is None:
        raise StackgateError(
            f"the lock the record was built from (sha256 {str(record.build.lock_sha256)[:12]}) "
            f"is {l_from}",
            details=[_HISTORY_HINT],
        )
    if m_from == "working tree" and l_from == "working tree":
        return Sources(stacks, stacks / "locks", [])
    notes = [f"manifest from {m_from}", f"lock from {l_from}"]
    out_stacks = workdir / "stacks"
    out_locks = out_stacks / "locks" / record.stack
    out_locks.mkdir(parents=True, exist_ok=True)
    (out_stacks / f"{record.stack}.toml").write_bytes(manifest)
    (out_locks / "uv.lock").write_bytes(lock)
    # The generated pyproject beside the lock carries the manifest hash the builder checks
    # for staleness: take it from the same commit as the lock.
    pyproject_path = lock_dir / "pyproject.toml"
    pyproject = pyproject_path.read_bytes() if pyproject_path.is_file() else None
    if l_from.startswith("git "):
        pyproject = _git_show(l_from.split()[1], pyproject_path)
    if pyproject is not None:
        (out_locks / "pyproject.toml").write_bytes(pyproject)
    if (stacks / "patches").is_dir():
        _copy_tree(stacks / "patches", out_stacks / "patches")
    for rules in ("rules.toml",):
        if (stacks / rules).is_file():
            (out_stacks / rules).write_bytes((stacks / rules).read_bytes())
    return Sources(out_stacks, out_stacks / "locks", notes)


def _copy_tree(src: Path, dst: Path) -> None:
    for item in src.rglob("*"):
        target = dst / item.relative_to(src)
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(item.read_bytes())


def base_site_of(record: Record) -> str | None:
    """The site-packages the recorded env was layered over (build record `base_site`), if any."""
    base = record.build.raw.get("base_site")
    path = base.get("path") if isinstance(base, dict) else None
    return path if isinstance(path, str) and path else None


def _build(record: Record, sources: Sources, options: ReproduceOptions) -> BuildOutput:
    argv: list[str | Path] = [
        sys.executable,
        "-m",
        "builder",
        "build",
        record.stack,
        "--locks-dir",
        sources.locks,
        "--json",
    ]
    if options.venv_root is not None:
        argv += ["--venv-root", options.venv_root]
    if options.wheelhouse is not None:
        argv += ["--offline", "--wheelhouse", options.wheelhouse]
    topology = options.topology or record.build.topology
    if topology:
        argv += ["--topology", topology]
    if options.python:
        argv += ["--python", options.python]
    for mapping in options.index_map:
        argv += ["--index-map", mapping]
    base = base_site_of(record)
    if base:
        # The record's env was layered over a host's site-packages: rebuild it the same way
        # (the tree hash covers the .pth naming the folder, not the folder's contents).
        argv += ["--base-site", base]
    env = {**os.environ, "STACKGATE_STACKS_DIR": str(sources.stacks)}
    done = proc.run(argv, env=env, check=False)
    if done.returncode == 0:
        return BuildOutput.from_child(done.stdout)
    try:
        message: str | None = ErrorOutput.model_validate_json(done.stdout).error
    except ValidationError:
        message = None
    if done.returncode == EXIT_BAD_INPUT:
        # The builder refuses bad input before it creates anything: an option given to
        # reproduce (--index-map, --venv-root, --python ...) or the record's manifest/lock.
        # That is exit 2 here as well, not a FAILED reproduction.
        tail = [line for line in done.stderr.splitlines() if line.strip()][-8:]
        raise BadInput(
            f"the builder refused its input: {message or (tail[-1] if tail else 'no message')}",
            details=tail,
        )
    raise CommandFailed(
        [str(a) for a in argv], done.returncode, message or done.stdout, done.stderr
    )


def _validate(record: Record, env: Path, sources: Sources, runs: int) -> list[Report]:
    env_vars = {**os.environ, "STACKGATE_STACKS_DIR": str(sources.stacks)}
    return [validate_once(record.stack, env, env_vars=env_vars) for _ in range(runs)]


def reproduce(
    record: Record, options: ReproduceOptions, *, here: HostFingerprint | None = None
) -> ReproduceOutcome:
    outcome = ReproduceOutcome(record=record.label, recorded_tree=record.build.env_tree_sha256)
    with _timed(outcome, "preflight"):
        host = here or probe_host()
        outcome.host = diff_hosts(record.host, host)
    for d in outcome.host:
        if d.impact == "blocks":
            outcome.differ(f"host {d.field}: recorded {d.recorded}, here {d.here} ({d.why})")
        elif d.impact == "performance":
            outcome.notes.append(f"host {d.field}: recorded {d.recorded}, here {d.here}")
    with tempfile.TemporaryDirectory(prefix="stackgate-reproduce-") as tmp:
        try:
            with _timed(outcome, "sources"):
                sources = materialize_sources(record, Path(tmp))
            outcome.notes += sources.notes
            with _timed(outcome, "build"):
                built = _build(record, sources, options)
        except BadInput:
            raise
        except StackgateError as exc:
            outcome.fail(f"build: {exc.message}")
            outcome.notes += exc.details[-5:]
            return outcome
        env = Path(built.env)
        outcome.env = str(env)
        facts = build_facts(built.record)
        outcome.built_tree = facts.env_tree_sha256
        check = recheck_env(env, facts)
        if not check.ok:
            # `builder build` reused an env whose files changed after it was built.
            outcome.fail(
                f"{env}: files differ from its build record: " + "; ".join(check.explain())
            )
            return outcome
        if record.build.env_tree_sha256 is not None:
            # hashed the way the record was: a record of an older tree-hash scheme names the
            # same files by another hash than today's build record does
            same = recheck_env(env, record.build)
            outcome.built_tree = same.tree.sha256
            if same.tree.scheme != check.tree.scheme:
                outcome.notes.append(
                    f"env tree compared under the record's hash scheme {same.tree.scheme} "
                    f"(built: {str(facts.env_tree_sha256)[:16]} under scheme {check.tree.scheme})"
                )
        if outcome.built_tree != outcome.recorded_tree:
            outcome.differ(
                f"env tree hash differs: recorded {str(outcome.recorded_tree)[:16]}, built "
                f"{str(outcome.built_tree)[:16]}"
            )
        if not options.validate:
            outcome.notes.append("validators not run (--no-validate)")
            return outcome
        with _timed(outcome, "validate"):
            reports = _validate(record, env, sources, max(1, options.runs))
        with _timed(outcome, "compare"):
            loaded = load_stack(sources.stacks / f"{record.stack}.toml")
            candidate = compose_record(loaded, reports, build=facts, host=host, kind="candidate")
            _judge(outcome, record, candidate, options.policy)
    return outcome


def _judge(
    outcome: ReproduceOutcome, record: Record, candidate: Record, base_policy: GatePolicy
) -> None:
    # The record has its repeats; a new host may run fewer: judge with what both have.
    policy = GatePolicy(
        tolerance=base_policy.tolerance,
        tail_tolerance=base_policy.tail_tolerance,
        confidence=base_policy.confidence,
        min_repeats=2,
        resamples=base_policy.resamples,
    )
    result = gate(record, candidate, policy)
    outcome.gate = result
    for c in result.checks:
        if c.failing:
            outcome.fail(f"check {c.check}: {c.status}: {c.reason}")
    for m in result.metrics:
        if m.status in ("REGRESSION", "IMPROVEMENT", "MISSING"):
            outcome.differ(f"metric {m.key}: {m.status}: {m.reason}")
        elif m.status == "TOO_FEW":
            outcome.notes.append(f"metric {m.key}: {m.reason}")
