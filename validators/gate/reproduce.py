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

import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
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
    ManifestError,
    StackgateError,
)
from stackgate.manifest.loading import LoadedStack, load_stack
from validators.core.results import Report
from validators.core.runs import validate_once
from validators.gate.compare import GateResult, gate
from validators.gate.policy import GatePolicy
from validators.gate.record_sources import Sources, check_base_site, materialize_sources
from validators.gate.recorded_tree import as_recorded
from validators.records.build_facts import build_facts
from validators.records.compose import compose_record
from validators.records.env_verify import recheck_env, recorded_scheme
from validators.records.fingerprint import HostDifference, diff_hosts, probe_host
from validators.records.model import BuildFacts, HostFingerprint, Record

Verdict = Literal["REPRODUCED", "DIFFERS", "FAILED"]


@dataclass
class ReproduceOptions:
    venv_root: Path | None = None
    wheelhouse: Path | None = None
    base_site: Path | None = None
    topology: str | None = None
    python: str | None = None
    index_map: Sequence[str] = ()
    validate: bool = True
    runs: int = 1
    runs_given: bool = True  # False: the record's count, cut to 1 on a host of another class
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
    # one line per part of the verdict: env, checks, correctness, numbers
    parts: dict[str, str] = field(default_factory=dict)
    host_inputs: list[str] = field(default_factory=list)

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
            "parts": self.parts,
            "host_inputs": self.host_inputs,
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
    if options.base_site is not None:
        # this host's copy of the record's base site (check_base_site compared it first)
        argv += ["--base-site", options.base_site]
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


# Host differences that make a host another class: its numbers are not comparable with the
# record's (they are reported, not judged).
HOST_CLASS_FIELDS = ("gpu.model", "gpu.count", "gpu.memory_gib", "interconnect")
CORRECTNESS_PREFIX = "serve-bench.correctness."


def other_host_class(differences: Sequence[HostDifference]) -> list[HostDifference]:
    return [d for d in differences if d.field in HOST_CLASS_FIELDS and d.impact != "info"]


def reproduce(
    record: Record, options: ReproduceOptions, *, here: HostFingerprint | None = None
) -> ReproduceOutcome:
    outcome = ReproduceOutcome(record=record.label, recorded_tree=record.build.env_tree_sha256)
    outcome.notes += check_base_site(record, options.base_site)
    with _timed(outcome, "preflight"):
        host = here or probe_host()
        outcome.host = diff_hosts(record.host, host)
    for d in outcome.host:
        if d.impact == "blocks":
            outcome.differ(f"host {d.field}: recorded {d.recorded}, here {d.here} ({d.why})")
        elif d.impact == "performance":
            outcome.notes.append(f"host {d.field}: recorded {d.recorded}, here {d.here}")
    blocking = [d.field for d in outcome.host if d.impact == "blocks"]
    outcome.parts["host"] = (
        f"differs in what the record's runs need: {', '.join(blocking)}"
        if blocking
        else "what the record's runs need is here"
    )
    with tempfile.TemporaryDirectory(prefix="stackgate-reproduce-") as tmp:
        try:
            with _timed(outcome, "sources"):
                sources = materialize_sources(record, Path(tmp))
        except BadInput:
            raise
        except StackgateError as exc:  # what the record pins is not on this host
            outcome.fail(exc.message)
            outcome.notes += exc.details
            outcome.parts["env"] = "not built"
            return outcome
        outcome.notes += sources.notes
        loaded = _load_sources(record, sources)
        outcome.notes += [f"manifest: {n}" for n in loaded.notes]
        try:
            with _timed(outcome, "build"):
                built = _build(record, sources, options)
        except BadInput as exc:
            raise BadInput(
                sources.shown(exc.message, record),
                details=[sources.shown(d, record) for d in exc.details],
            ) from None
        except StackgateError as exc:
            outcome.fail(f"build: {sources.shown(exc.message, record)}")
            outcome.notes += [sources.shown(d, record) for d in exc.details[-5:]]
            outcome.parts["env"] = "not built"
            return outcome
        env = Path(built.env)
        outcome.env = str(env)
        facts = build_facts(built.record)
        check = recheck_env(env, facts)
        if not check.ok:
            # `builder build` reused an env whose files changed after it was built.
            outcome.fail(
                f"{env}: files differ from its build record: " + "; ".join(check.explain())
            )
            outcome.parts["env"] = "damaged"
            return outcome
        _compare_tree(outcome, record, env, facts)
        if not options.validate:
            outcome.notes.append("validators not run (--no-validate)")
            for part in ("checks", "correctness", "numbers"):
                outcome.parts[part] = "not run (--no-validate)"
            return outcome
        runs = max(1, options.runs)
        if not options.runs_given and other_host_class(outcome.host) and runs > 1:
            outcome.notes.append(
                f"1 validation run, not {runs}: this host is of another class, its numbers "
                "are not compared with the record's (--runs N measures anyway)"
            )
            runs = 1
        with _timed(outcome, "validate"):
            reports = _validate(record, env, sources, runs)
        with _timed(outcome, "compare"):
            candidate = compose_record(loaded, reports, build=facts, host=host, kind="candidate")
            _judge(outcome, record, candidate, options.policy)
    return outcome


def _load_sources(record: Record, sources: Sources) -> LoadedStack:
    """The record's manifest, loaded (older forms through stackgate.manifest.migrate); one
    that no longer loads is named as the record's, not by the folder it was copied to."""
    try:
        return load_stack(sources.stacks / f"{record.stack}.toml")
    except ManifestError as exc:
        raise BadInput(
            f"record {record.label}: its manifest (stacks/{record.stack}.toml, "
            f"{sources.manifest_from}) does not load with this stackgate",
            details=[sources.shown(d, record) for d in exc.details],
        ) from None


def _compare_tree(outcome: ReproduceOutcome, record: Record, env: Path, facts: BuildFacts) -> None:
    """The built tree against the recorded one, generated files as the record wrote them."""
    if record.build.env_tree_sha256 is None:
        outcome.parts["env"] = "no tree hash in the record"
        return
    tree = as_recorded(env, record.build, facts)
    if tree.scheme != recorded_scheme(facts):
        outcome.notes.append(f"env tree compared under the record's hash scheme {tree.scheme}")
    outcome.built_tree = tree.sha256
    outcome.host_inputs = [i.line() for i in tree.inputs]
    if tree.sha256 == outcome.recorded_tree:
        outcome.parts["env"] = "env tree identical" + (
            f" ({len(tree.inputs)} host input(s) in generated files compared as the record's build wrote them)"
            if tree.inputs
            else ""
        )
        return
    outcome.parts["env"] = "env tree differs"
    outcome.differ(
        f"env tree hash differs: recorded {str(outcome.recorded_tree)[:16]}, built "
        f"{tree.sha256[:16]} (scheme {tree.scheme}, generated files as the record wrote them); "
        "the record holds the tree's hash, not its file listing, so the files cannot be named"
    )


def _judge(
    outcome: ReproduceOutcome, record: Record, candidate: Record, base_policy: GatePolicy
) -> None:
    # The record has its repeats; a new host may run fewer: judge with what both have.
    result = gate(record, candidate, replace(base_policy, min_repeats=2))
    outcome.gate = result
    failing = [c for c in result.checks if c.failing]
    for c in failing:
        outcome.fail(f"check {c.check}: {c.status}: {c.reason}")
    plain = [c for c in failing if not c.check.startswith(CORRECTNESS_PREFIX)]
    wrong = [c for c in failing if c.check.startswith(CORRECTNESS_PREFIX)]
    ran = [c for c in result.checks if c.check.startswith(CORRECTNESS_PREFIX)]
    outcome.parts["checks"] = f"{len(plain)} failing" if plain else "every recorded check holds"
    outcome.parts["correctness"] = (
        f"{len(wrong)} failing" if wrong else ("matches the record" if ran else "not checked")
    )
    other = other_host_class(outcome.host)
    if other:
        what = ", ".join(f"{d.field} {d.here} here, {d.recorded} recorded" for d in other)
        outcome.parts["numbers"] = f"not comparable here ({what})"
        return
    moved = [m for m in result.metrics if m.status in ("REGRESSION", "IMPROVEMENT", "MISSING")]
    for m in moved:
        outcome.differ(f"metric {m.key}: {m.status}: {m.reason}")
    for m in result.metrics:
        if m.status == "TOO_FEW":
            outcome.notes.append(f"metric {m.key}: {m.reason}")
    outcome.parts["numbers"] = f"{len(moved)} differ" if moved else "within noise"
