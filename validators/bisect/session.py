"""A bisect from start to verdict: units, their merging, the steps, the search, the counts."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.errors import BadInput, StackgateError
from stackgate.layout import EnvLayout, LockFiles
from stackgate.lock.state import read_lock
from stackgate.manifest.loading import LoadedStack
from stackgate.output import console_err
from stackgate.python_finder import Interpreter
from validators.bisect import builder_cli
from validators.bisect.intermediate import (
    Sides,
    check_before_install,
    intermediate_raw,
    lock_intermediate,
    write_intermediate,
)
from validators.bisect.refused import Refusal
from validators.bisect.search import Culprit, Mode, bisect
from validators.bisect.steps import MetricNumber, Step, StepStore
from validators.bisect.units import ChangeUnit, canonical, lock_versions, merge
from validators.core.runs import run_interleaved, run_validations
from validators.gate.candidate import candidate_record
from validators.gate.compare import GateResult, gate
from validators.gate.policy import GatePolicy
from validators.records.model import Record

LOCK_JOBS = max(1, min(4, os.cpu_count() or 1))  # unit locks run side by side


class BudgetSpent(Exception):
    """--max-gates / --max-builds reached before the search finished."""


class Unresolvable(StackgateError):
    """A subset of units uv cannot resolve even after merging (exit 2)."""

    error_id = "bisect-unresolvable"
    hint = "uv's reasons are listed above; change the candidate so it resolves, then bisect again"


@dataclass
class Counts:
    locks: int = 0  # uv lock runs
    builds: int = 0  # envs built (not reused)
    builds_reused: int = 0
    gates: int = 0  # gates run in this invocation
    cached: int = 0  # steps answered from the state file
    before_install: int = 0  # steps refused by static --lock (no build)


@dataclass(frozen=True)
class Settings:
    work: Path
    venv_root: Path
    python: Interpreter
    policy: GatePolicy
    repeats: int
    interleave: bool
    baseline_env: Path | None
    metrics: tuple[str, ...]
    max_gates: int | None
    max_builds: int | None
    keep_runs: bool


@dataclass
class Bisect:
    sides: Sides
    baseline: Record
    settings: Settings
    units: list[ChangeUnit] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    steps: list[tuple[Step, bool]] = field(default_factory=list)  # (step, from the cache)

    def __post_init__(self) -> None:
        self.store = StepStore(self.settings.work / "steps.json")
        self.console = console_err()
        self._unresolved: dict[str, list[str]] = {}  # intermediate stack -> uv's words

    # -- units -----------------------------------------------------------------------------

    def _stack_for(self, applied: Sequence[str], free: Sequence[str] = ()) -> LoadedStack:
        raw = intermediate_raw(self.sides, self.units, set(applied), free=set(free))
        what = "+".join(applied) if applied else "baseline"
        return write_intermediate(self.sides, raw, self.settings.work / "stacks", what)

    def _lock(self, loaded: LoadedStack) -> tuple[str | None, list[str]]:
        known = self._unresolved.get(loaded.manifest.name)
        if known is not None:
            return None, known
        locked = lock_intermediate(
            loaded, self.settings.work / "locks", self.sides, self.settings.python
        )
        if not locked.reused:
            self.counts.locks += 1
        return locked.lock_hash, locked.why

    def _lock_side_by_side(self, stacks: Sequence[LoadedStack]) -> None:
        """Lock these stacks LOCK_JOBS at a time (a uv lock mostly waits on the index and the
        disk); the sequential pass after reuses each lock, and each no-resolution, by name."""
        work = self.settings.work / "locks"

        def one(loaded: LoadedStack) -> tuple[str, bool, list[str] | None]:
            done = lock_intermediate(loaded, work, self.sides, self.settings.python)
            return loaded.manifest.name, done.reused, done.why if done.lock_hash is None else None

        with ThreadPoolExecutor(max_workers=LOCK_JOBS) as pool:
            for name, reused, why in pool.map(one, stacks):
                self.counts.locks += 0 if reused else 1
                if why is not None:
                    self._unresolved[name] = why

    def merge_forced(self, units: list[ChangeUnit]) -> list[ChangeUnit]:
        """Every unit must resolve alone; one that does not is locked again with the other
        changed distributions free, and merged with those uv moved (the reason: uv's words)."""
        self.units = units
        changed = {canonical(d.name) for u in units for d in u.dists}
        self._lock_side_by_side([self._stack_for([u.id]) for u in units])
        i = 0
        while i < len(self.units):
            unit = self.units[i]
            lock_hash, why = self._lock(self._stack_for([unit.id]))
            if lock_hash is not None:
                i += 1
                continue
            free = sorted(changed - {canonical(d.name) for d in unit.dists})
            loaded = self._stack_for([unit.id], free)
            free_hash, free_why = self._lock(loaded)
            if free_hash is None:
                raise Unresolvable(
                    f"change unit {unit.id} ({unit.label}) cannot be applied to the baseline "
                    "even with the other changed distributions left to uv",
                    details=free_why[:12],
                )
            files = LockFiles(self.settings.work / "locks" / loaded.manifest.name)
            moved = lock_versions(read_lock(loaded, files).lock)
            with_it = {
                u.id
                for u in self.units
                for d in u.dists
                if canonical(d.name) in free
                and canonical(d.name) in moved  # a free one nothing needs is just left out
                and moved[canonical(d.name)] != d.old
            }
            if not with_it:
                raise Unresolvable(
                    f"change unit {unit.id} ({unit.label}) does not resolve alone, and uv "
                    "moves no other changed distribution when they are left free",
                    details=why[:12],
                )
            names = ", ".join(
                sorted(d.text() for u in self.units if u.id in with_it for d in u.dists)
            )
            reason = _uv_reason(why) or "uv found no resolution with them apart"
            merged = {unit.id, *with_it}
            self.units = merge(self.units, merged, f"{unit.label} needs {names}: {reason}")
            i = next(
                j
                for j, u in enumerate(self.units)
                if u.merged_because and unit.id in u.id.split("+")
            )
        return self.units

    # -- steps -----------------------------------------------------------------------------

    def gate(self, subset: frozenset[int], attempt: int) -> bool:
        """The search's gate: the step of these units, its `attempt`-th measurement."""
        applied = [self.units[i].id for i in sorted(subset)]
        return self.step(applied, attempt).regressed

    def step(self, applied: list[str], attempt: int = 1) -> Step:
        """The step of these units: from the state file when it was finished before, else
        checked, built and gated. attempt > 1: a second measurement of the same stack."""
        loaded = self._stack_for(applied)
        name = loaded.manifest.name
        lock_hash, why = self._lock(loaded)
        if lock_hash is None:
            raise Unresolvable(
                f"the baseline with units {', '.join(applied)} applied does not resolve "
                "(each unit resolves alone; together they do not)",
                details=why[:12],
            )
        lockfile = self.settings.work / "locks" / name / "uv.lock"
        key = self._key(loaded)
        if attempt > 1:
            first = self.store.get(key)
            if first is not None and first.verdict == "FAIL_BEFORE_INSTALL":
                return first  # the static verdict does not change when asked again
            key = f"{key}-{attempt}"
        known = self.store.get(key)
        if known is not None:
            theirs = known.refused_gate is not None  # the refused gate's, not a cached gate
            self.counts.cached += 0 if theirs else 1
            self.steps.append((known, not theirs))
            self._say(known, cached=not theirs)
            return known
        started = time.monotonic()
        shown = "+".join(applied) + (f" (measured again: attempt {attempt})" if attempt > 1 else "")
        self.console.print(f"step {len(self.steps) + 1}: {shown}: static --lock", highlight=False)
        results = check_before_install(loaded, lockfile)
        failed = [r for r in results if r.status == "FAIL"]
        if failed:
            self.counts.before_install += 1
            step = Step(
                key=key, stack=name, applied=applied, lock_sha256=lock_hash, attempt=attempt,
                verdict="FAIL_BEFORE_INSTALL",
                reasons=[f"check {r.check}: FAIL: {r.reason}" for r in failed],
                seconds=round(time.monotonic() - started, 2),
            )  # fmt: skip
        else:
            if self.settings.max_gates is not None and self.counts.gates >= self.settings.max_gates:
                raise BudgetSpent(f"--max-gates {self.settings.max_gates} reached")
            env = self._build(loaded, lock_hash)
            result = self._gate(loaded, env, key)
            reasons = self._judged(result)
            step = Step(
                key=key, stack=name, applied=applied, lock_sha256=lock_hash, attempt=attempt,
                verdict="REGRESSED" if reasons else "SAME", reasons=reasons,
                metrics=self._numbers(result), env=str(env),
                gate_json=str(self.settings.work / "gates" / f"{key[:16]}.json"),
                seconds=round(time.monotonic() - started, 2),
            )  # fmt: skip
        self.store.put(step)
        self.steps.append((step, False))
        self._say(step, cached=False)
        return step

    def take_refusal(self, refusal: Refusal) -> bool:
        """The whole candidate's first measurement is the refused gate's verdict (a step of
        the state file, no gate spent). False when the gate refused for none of the metrics
        bisected: then the whole candidate is gated as for a stack."""
        reasons = self._judged(refusal.result)
        if not reasons:
            self.console.print(
                f"{refusal.path}: the gate refused for none of the metrics bisected "
                f"({', '.join(self.settings.metrics)}); the whole candidate is gated",
                highlight=False,
            )
            return False
        applied = [u.id for u in self.units]
        loaded = self._stack_for(applied)
        lock_hash, why = self._lock(loaded)
        if lock_hash is None:
            raise Unresolvable("the baseline with every unit applied does not resolve", details=why)
        key = self._key(loaded)
        if self.store.get(key) is None:
            out = self.settings.work / "gates" / f"{key[:16]}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(refusal.result.model_dump_json(indent=1))
            step = Step(
                key=key, stack=loaded.manifest.name, applied=applied, lock_sha256=lock_hash,
                verdict="REGRESSED", reasons=reasons, metrics=self._numbers(refusal.result),
                gate_json=str(out), refused_gate=str(refusal.path),
            )  # fmt: skip
            self.store.put(step)
        return True

    def _key(self, loaded: LoadedStack) -> str:
        lockfile = self.settings.work / "locks" / loaded.manifest.name / "uv.lock"
        return hashlib.sha256(loaded.path.read_bytes() + b"\0" + lockfile.read_bytes()).hexdigest()

    def _say(self, step: Step, *, cached: bool) -> None:
        where = " (from the state file)" if cached else ""
        where = f" (the refused gate {step.refused_gate})" if step.refused_gate else where
        self.console.print(
            f"step {len(self.steps)}: {'+'.join(step.applied)}: {step.verdict}{where}",
            highlight=False,
        )

    def _build(self, loaded: LoadedStack, lock_hash: str) -> Path:
        layout = EnvLayout(self.settings.venv_root, loaded.manifest.name)
        if not layout.final(lock_hash).is_dir() and (
            self.settings.max_builds is not None and self.counts.builds >= self.settings.max_builds
        ):
            raise BudgetSpent(f"--max-builds {self.settings.max_builds} reached")
        self.console.print(
            f"  build {loaded.manifest.name} (lock {lock_hash[:12]})", highlight=False
        )
        s = self.settings
        outcome = builder_cli.build(loaded.path, s.work / "locks", s.venv_root, s.python.path)
        if outcome.reused:
            self.counts.builds_reused += 1
        else:
            self.counts.builds += 1
        return Path(outcome.env)

    def _gate(self, loaded: LoadedStack, env: Path, key: str) -> GateResult:
        s = self.settings
        self.counts.gates += 1
        keep = s.work / "runs" / key[:16] if s.keep_runs else None
        stack = str(loaded.path)
        if s.interleave:
            assert s.baseline_env is not None
            base_reports, cand_reports = run_interleaved(
                (self.baseline.stack, s.baseline_env), (stack, env), s.repeats, keep_dir=keep
            )
            fresh = candidate_record(self.baseline.stack, base_reports, env=s.baseline_env)
            cand = candidate_record(stack, cand_reports, env=env)
            result = gate(self.baseline, cand, s.policy, remeasured=fresh)
        else:
            reports = run_validations(stack, env, s.repeats, keep_dir=keep)
            cand = candidate_record(stack, reports, env=env)
            result = gate(self.baseline, cand, s.policy)
        out = s.work / "gates" / f"{key[:16]}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(result.model_dump_json(indent=1))
        return result

    def _matches(self, key: str) -> bool:
        return not self.settings.metrics or any(
            fnmatch.fnmatchcase(key, p) for p in self.settings.metrics
        )

    def _judged(self, result: GateResult) -> list[str]:
        """What counts as the regression: a failing check, or a failing metric that --metric
        names (every failing metric when none is named)."""
        if self.settings.metrics and not any(self._matches(m.key) for m in result.metrics):
            raise BadInput(
                f"--metric {' '.join(self.settings.metrics)}: matches none of the gate's metrics",
                details=[m.key for m in result.metrics][:40],
            )
        reasons = [f"check {c.check}: {c.status}: {c.reason}" for c in result.checks if c.failing]
        reasons += [
            f"metric {m.key}: {m.status}: {m.reason}"
            for m in result.metrics
            if m.failing and self._matches(m.key)
        ]
        return reasons

    def _numbers(self, result: GateResult) -> list[MetricNumber]:
        return [
            MetricNumber(key=m.key, status=m.status, ratio=m.ratio, low=m.low, high=m.high)
            for m in result.metrics
            if (self._matches(m.key) if self.settings.metrics else m.failing)
        ]

    # -- the search ------------------------------------------------------------------------

    def run(
        self, mode: Mode, refusal: Refusal | None = None
    ) -> tuple[str, list[tuple[list[ChangeUnit], float]]]:
        """('culprits' | 'no-regression' | 'budget-spent', the culprit unit sets with the
        search's confidence in each). refusal: the gate that refused the candidate."""
        refused = refusal is not None and self.take_refusal(refusal)
        try:
            found = bisect(mode, len(self.units), self.gate, refused=refused)
        except BudgetSpent as spent:
            self.console.print(f"stopped: {spent}", highlight=False)
            return "budget-spent", []
        if found is None:
            return "no-regression", []
        return "culprits", [_named(self.units, c) for c in found]


def _named(units: Sequence[ChangeUnit], culprit: Culprit) -> tuple[list[ChangeUnit], float]:
    return [units[i] for i in sorted(culprit.units)], culprit.confidence


def _uv_reason(lines: Sequence[str]) -> str:
    """uv's explanation, in one line: its 'Because ...' sentence(s)."""
    text = " ".join(line.strip() for line in lines if line.strip())
    start = text.find("Because")
    if start < 0:
        return ""
    reason = text[start:]
    end = reason.find("unsatisfiable")
    return reason[: end + len("unsatisfiable")] if end >= 0 else reason[:300]
